//! Named leases with an owner token (DESIGN: "one instance at a time (owner-token lock)"): a row
//! per name, taken with one conditional upsert that succeeds only when the lease is free, lapsed
//! or already ours, and given back only by its owner. Portable across SQLite and PostgreSQL, so
//! the single-reconciler rule and the token-refresher rule hold across processes on either.

use super::Db;

/// Takes (or renews) lease `name` for `owner` until `until_ms` (epoch ms) if it is free, lapsed
/// at `now_ms`, or already held by `owner`. Returns whether `owner` now holds it.
pub async fn acquire(
    db: &Db,
    name: &str,
    owner: &str,
    now_ms: i64,
    until_ms: i64,
) -> sqlx::Result<bool> {
    let n = sqlx::query(
        "INSERT INTO leases (name, owner, lease_until) VALUES ($1, $2, $3) \
         ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, lease_until = excluded.lease_until \
         WHERE leases.lease_until <= $4 OR leases.owner = excluded.owner",
    )
    .bind(name)
    .bind(owner)
    .bind(until_ms)
    .bind(now_ms)
    .execute(db)
    .await?
    .rows_affected();
    Ok(n == 1)
}

/// Sets the end of `owner`'s lease `name` to `until_ms` (give it back with `until_ms = 0`, or
/// keep it after a failure). Does nothing when someone else holds it.
pub async fn set_until(db: &Db, name: &str, owner: &str, until_ms: i64) -> sqlx::Result<bool> {
    let n = sqlx::query("UPDATE leases SET lease_until = $1 WHERE name = $2 AND owner = $3")
        .bind(until_ms)
        .bind(name)
        .bind(owner)
        .execute(db)
        .await?
        .rows_affected();
    Ok(n == 1)
}

//! "People ahead" and "Leave the line" (issue 18 item 5; DECISIONS.md "People ahead"): a
//! fan's position carries `ahead` = number − cursor − 1 minus the places between whose fans
//! left; the cursor skips vacated places without an invitation and forgets them as it passes;
//! a pre-queued fan can leave the pre-queue; nobody leaves a place the cursor has reached.

use super::{advance, create, ev, join, open_with, Store, NOW, SILENCE};
use waiting_room::domain::{Left, VisitorId};

async fn ahead(s: &Store, v: &VisitorId) -> Option<u64> {
    s.position(&ev(), v).await.expect("position").ahead
}

async fn leave(s: &Store, v: &VisitorId) -> Left {
    s.leave(&ev(), v).await.expect("leave")
}

async fn figures(s: &Store) -> waiting_room::domain::Figures {
    let f = s.figures(&ev(), NOW * 1000, SILENCE).await;
    f.expect("figures").expect("exists")
}

pub async fn people_ahead_excludes_vacated_places(s: Store) {
    open_with(&s, 10).await;
    let fans: Vec<VisitorId> = (0..5).map(|_| VisitorId::random()).collect();
    for (i, f) in fans.iter().enumerate() {
        assert_eq!(join(&s, f).await, Some(i as u64 + 1));
    }
    assert_eq!(ahead(&s, &fans[4]).await, Some(4), "number − cursor − 1");
    assert_eq!(leave(&s, &fans[1]).await, Left::Vacated(2));
    assert_eq!(leave(&s, &fans[2]).await, Left::Vacated(3));
    assert_eq!(leave(&s, &fans[1]).await, Left::NotWaiting, "left once");
    assert_eq!(
        ahead(&s, &fans[4]).await,
        Some(2),
        "two places ahead vacated"
    );
    assert_eq!(ahead(&s, &fans[3]).await, Some(1));
    assert_eq!(ahead(&s, &fans[0]).await, Some(0));
    assert_eq!(ahead(&s, &fans[1]).await, None, "no place any more");
    let f = figures(&s).await;
    assert_eq!((f.left, f.queue_length()), (2, 3));

    // The cursor invites 1 and 4 and skips the vacated 2 and 3 (no invitation slot for them).
    let a = advance(&s, 2, 10, NOW, 60).await;
    assert_eq!((a.cursor, a.moved, a.skipped), (4, 2, 2));
    assert_eq!(
        figures(&s).await.active,
        2,
        "no invitation for a vacated place"
    );
    assert_eq!(ahead(&s, &fans[4]).await, Some(0));
    assert_eq!(ahead(&s, &fans[3]).await, Some(0), "reached: nobody ahead");
    let f = figures(&s).await;
    assert_eq!(
        (f.left, f.queue_length()),
        (0, 1),
        "passed places are forgotten"
    );
    assert_eq!(
        leave(&s, &fans[3]).await,
        Left::NotWaiting,
        "invited: too late"
    );
    assert_eq!(
        join(&s, &fans[1]).await,
        Some(6),
        "back: a new place at the back"
    );
    assert_eq!(ahead(&s, &fans[1]).await, Some(1));
}

pub async fn leaving_the_prequeue(s: Store) {
    create(&s, 10).await;
    let (a, b) = (VisitorId::random(), VisitorId::random());
    assert_eq!(join(&s, &a).await, None);
    assert_eq!(join(&s, &b).await, None);
    assert_eq!(leave(&s, &a).await, Left::Unqueued);
    assert_eq!(leave(&s, &a).await, Left::NotWaiting);
    assert_eq!(figures(&s).await.prequeued, 1);
    assert_eq!(ahead(&s, &a).await, None);
}

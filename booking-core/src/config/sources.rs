//! Where the configuration comes from, lowest layer first: the JSON file, then `BOOKING_*`
//! environment variables (figment merges them; an error names the key and the layer, e.g.
//! `for key "BOOKING_LEEWAY_SECS" in environment`). A variable is named after the key, nesting
//! with `__`: `BOOKING_CHANNELS__WEB__HOLD_SECS=600`. Values are text; numbers and booleans
//! are read from it, and a value starting with `[` or `{` is a JSON list or map
//! (`BOOKING_QUEUED_SHOWS='["demo"]'`). Each secret of [`SECRET_KEYS`] may instead come from a file
//! named by `<key>_file` (`BOOKING_<KEY>_FILE`, Docker secrets): read within its layer,
//! surrounding whitespace dropped (for `webhook_secrets`: one secret per line), so a higher
//! layer's secret replaces a lower one however each was given.
//!
//! The environment is a parameter (`std::env::vars()` in `main`), so tests never call `set_var`.

use std::path::{Path, PathBuf};

use figment::providers::{Format, Json};
use figment::value::{Dict, Map, Value};
use figment::{Error, Figment, Metadata, Profile, Provider};

use super::{Config, ConfigFile};

/// Prefix of the environment overrides.
pub const ENV_PREFIX: &str = "BOOKING_";

/// `BOOKING_*` variables that are the binary's own flags, not configuration keys.
const NOT_KEYS: &[&str] = &["LISTEN", "CONFIG"];

/// Keys whose value may come from a file named by `<key>_file`.
pub const SECRET_KEYS: &[&str] = &[
    "admin_token",
    "gateway_secret",
    "gateway_client_secret",
    "webhook_secrets",
    "service_token",
];

impl Config {
    /// Reads the JSON file at `path` (if any) with the `BOOKING_*` overrides of `env` on top,
    /// loads the venue files and checks every value, reporting all problems at once.
    ///
    /// # Errors
    /// An unreadable file, a value of the wrong type (named by key and layer), or a
    /// [`sale_common::config::Invalid`] listing every problem.
    pub fn load(
        path: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> anyhow::Result<Config> {
        Ok(ConfigFile::from_sources(path, env)?.into_config()?)
    }
}

impl ConfigFile {
    /// The file at `path` (if any) merged with the `BOOKING_*` overrides of `env`.
    ///
    /// # Errors
    /// An unreadable or malformed file, an unknown key, a value of the wrong type.
    pub fn from_sources(
        path: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> anyhow::Result<ConfigFile> {
        let mut figment = Figment::new();
        if let Some(path) = path {
            let text = std::fs::read_to_string(path).map_err(|e| {
                anyhow::anyhow!("cannot read the configuration file {}: {e}", path.display())
            })?;
            figment = figment.merge(FileLayer {
                path: path.to_owned(),
                text,
            });
        }
        let env: Vec<(String, String)> = env
            .into_iter()
            .filter(|(k, _)| k.starts_with(ENV_PREFIX))
            .collect();
        figment = figment.merge(EnvLayer(env));
        Ok(figment.extract_lossy()?)
    }
}

/// The JSON file; its paths are relative to its folder.
struct FileLayer {
    path: PathBuf,
    text: String,
}

impl Provider for FileLayer {
    fn metadata(&self) -> Metadata {
        Metadata::from("configuration file", self.path.as_path())
            .interpolater(|_: &Profile, keys: &[&str]| keys.join("."))
    }

    fn data(&self) -> Result<Map<Profile, Dict>, Error> {
        let mut data = Json::string(&self.text).data()?;
        let base = self.path.parent().unwrap_or(Path::new("."));
        for dict in data.values_mut() {
            secret_files(dict, base, "the configuration file").map_err(Error::from)?;
        }
        Ok(data)
    }
}

/// The `BOOKING_*` variables.
struct EnvLayer(Vec<(String, String)>);

impl Provider for EnvLayer {
    fn metadata(&self) -> Metadata {
        Metadata::named("environment").interpolater(|_: &Profile, keys: &[&str]| {
            format!("{ENV_PREFIX}{}", keys.join("__").to_ascii_uppercase())
        })
    }

    fn data(&self) -> Result<Map<Profile, Dict>, Error> {
        let mut dict = Dict::new();
        for (name, value) in &self.0 {
            let rest = &name[ENV_PREFIX.len()..];
            if NOT_KEYS.contains(&rest) || rest.is_empty() {
                continue;
            }
            let path: Vec<String> = rest.split("__").map(str::to_ascii_lowercase).collect();
            if path.iter().any(String::is_empty) {
                return Err(Error::from(format!(
                    "{name}: an empty key between `__` separators"
                )));
            }
            insert(&mut dict, &path, env_value(&path[0], value));
        }
        secret_files(&mut dict, Path::new(""), "the environment").map_err(Error::from)?;
        Ok(Map::from([(Profile::Default, dict)]))
    }
}

/// Text, except a JSON list or map (`[…]`, `{…}`) outside secrets; numbers and booleans are read
/// from text when the key wants one (`extract_lossy`), so a secret of digits stays text.
fn env_value(top_key: &str, text: &str) -> Value {
    let secret = SECRET_KEYS
        .iter()
        .any(|k| top_key == *k || top_key.strip_suffix("_file") == Some(k));
    if !secret && (text.starts_with('[') || text.starts_with('{')) {
        serde_json::from_str(text).unwrap_or_else(|_| Value::from(text.to_owned()))
    } else {
        Value::from(text.to_owned())
    }
}

fn insert(dict: &mut Dict, path: &[String], value: Value) {
    let [first, rest @ ..] = path else { return };
    if rest.is_empty() {
        dict.insert(first.clone(), value);
        return;
    }
    let entry = dict
        .entry(first.clone())
        .or_insert_with(|| Value::from(Dict::new()));
    if !matches!(entry, Value::Dict(..)) {
        *entry = Value::from(Dict::new());
    }
    if let Value::Dict(_, inner) = entry {
        insert(inner, rest, value);
    }
}

/// Replaces each `<key>_file` of one layer by the secret read from that file. `Err`: what is
/// wrong, for the layer's `figment::Error` (kept small here: that type is over 200 bytes).
fn secret_files(dict: &mut Dict, base: &Path, layer: &str) -> Result<(), String> {
    for key in SECRET_KEYS {
        let file_key = format!("{key}_file");
        let Some(v) = dict.remove(&file_key) else {
            continue;
        };
        if dict.contains_key(*key) {
            return Err(format!(
                "{key} and {file_key} are both set in {layer}: give one"
            ));
        }
        let Some(name) = v.as_str() else {
            return Err(format!("{file_key}: must be a file path"));
        };
        let path = base.join(name);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("{file_key}: cannot read {}: {e}", path.display()))?;
        let value = if *key == "webhook_secrets" {
            let lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
            Value::from(lines.map(Value::from).collect::<Vec<_>>())
        } else {
            Value::from(text.trim().to_owned())
        };
        dict.insert((*key).to_owned(), value);
    }
    Ok(())
}

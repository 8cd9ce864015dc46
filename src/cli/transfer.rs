//! Moving all state out of and into the configured store (`hotrank
//! export`/`import`, the archive, `import --from-redis`), and with a dump
//! the site's identity key, without which the hashes in it mean nothing.

use crate::app::{open_embedded, open_redis};
use crate::clock::{Clock, SystemClock};
use crate::config::{Config, StoreKind};
use crate::secrets::{IDENTITY_FILE, read_identity_key, write_identity_key};
use crate::store::StoreSettings;
use crate::store::dump::{DUMP_VERSION, Record};
use crate::store::embedded::{Durability, EmbeddedStore};
use crate::store::redis::{dump_redis, load_redis};

/// All state of the configured store as dump records.
pub fn store_records(rt: &tokio::runtime::Runtime, config: &Config) -> Result<Vec<Record>, String> {
    match config.store {
        StoreKind::Embedded => {
            let store = open_embedded(config)?;
            let mut r = vec![Record::Header {
                version: DUMP_VERSION,
                source: "embedded".into(),
            }];
            r.extend(store.export());
            Ok(r)
        }
        StoreKind::Redis => {
            let _in_runtime = rt.enter();
            let store = open_redis(config)?;
            rt.block_on(dump_redis(&store, SystemClock.now()))
                .map_err(|e| e.to_string())
        }
    }
}

/// Loads dump records into the configured store, which must be empty;
/// returns the number of articles.
pub fn load_records(
    rt: &tokio::runtime::Runtime,
    config: &Config,
    records: &[Record],
) -> Result<u64, String> {
    let settings = StoreSettings::from_config(config);
    match config.store {
        StoreKind::Embedded => {
            EmbeddedStore::import_into(&Durability::from_config(config), &settings, records)
                .map_err(|e| e.to_string())
        }
        StoreKind::Redis => {
            let _in_runtime = rt.enter();
            let store = open_redis(config)?;
            rt.block_on(async {
                let n = load_redis(&store, records, &settings, SystemClock.now())
                    .await
                    .map_err(|e| e.to_string())?;
                // A Redis that lost its data holds it again: API nodes of the
                // direct store serve it from now (marker.rs). With a journal
                // only `archive restore --replay` may.
                if config.pipeline.log_url.is_empty() {
                    let (epoch, _) = store.set_epoch().await.map_err(|e| e.to_string())?;
                    eprintln!("Redis holds site epoch {epoch}: API nodes serve it");
                }
                Ok(n)
            })
        }
    }
}

/// `hotrank export`: the store's records with the data dir's identity key
/// after the header, and a warning for the operator if it has none.
pub fn export_records(
    rt: &tokio::runtime::Runtime,
    config: &Config,
) -> Result<(Vec<Record>, Option<String>), String> {
    let mut records = store_records(rt, config)?;
    match read_identity_key(&config.data_dir)? {
        Some(key) => {
            records.insert(1, Record::Identity { key });
            Ok((records, None))
        }
        None => Ok((
            records,
            Some(format!(
                "{} does not exist: the dump carries no identity key, and a site that imports \
                 it counts returning readers again unless it gets this site's {IDENTITY_FILE} \
                 (export with --data-dir of a node of this site)",
                config.data_dir.join(IDENTITY_FILE).display()
            )),
        )),
    }
}

/// `hotrank import`: loads a dump into the configured store and installs
/// the identity key it carries in the data dir. A dump keyed otherwise
/// than the data dir's own `identity.key` is refused before anything is
/// loaded. Returns the number of articles and a warning for the operator
/// if the dump carries no key (version 1).
pub fn import_records(
    rt: &tokio::runtime::Runtime,
    config: &Config,
    records: &[Record],
) -> Result<(u64, Option<String>), String> {
    let carried = records.iter().find_map(|r| match r {
        Record::Identity { key } => Some(key.as_str()),
        _ => None,
    });
    let own = read_identity_key(&config.data_dir)?;
    let path = config.data_dir.join(IDENTITY_FILE);
    if let (Some(carried), Some(own)) = (carried, &own)
        && carried != own
    {
        return Err(format!(
            "the dump was exported with another identity key than {path}: every visitor \
             hash in it is keyed by the exported site's key, so readers it has counted would \
             count again here. Import into a data dir without {IDENTITY_FILE} (the dump's key \
             is installed), or replace {path} with the exported site's {IDENTITY_FILE}",
            path = path.display()
        ));
    }
    let n = load_records(rt, config, records)?;
    let warning = match (carried, own) {
        (Some(key), None) => {
            write_identity_key(&config.data_dir, key).map_err(|e| {
                format!(
                    "imported {n} articles, but installing the dump's identity key failed ({e}): \
                     copy {IDENTITY_FILE} from the exported site's data dir to {}",
                    path.display()
                )
            })?;
            None
        }
        (Some(_), Some(_)) => None,
        (None, _) => Some(format!(
            "the dump carries no identity key (a version 1 dump): copy {IDENTITY_FILE} from the \
             exported site's data dir to {} before serving, or readers it has counted count again",
            path.display()
        )),
    };
    Ok((n, warning))
}

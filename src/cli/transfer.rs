//! Moving all state out of and into the configured store (`hotrank
//! export`/`import`, the archive, `import --from-redis`).

use crate::clock::{Clock, SystemClock};
use crate::config::{Config, StoreKind};
use crate::store::StoreSettings;
use crate::store::dump::{DUMP_VERSION, Record};
use crate::store::embedded::{Durability, EmbeddedStore};
use crate::store::redis::{RedisOptions, RedisStore, dump_redis, load_redis};

/// All state of the configured store as dump records.
pub fn store_records(rt: &tokio::runtime::Runtime, config: &Config) -> Result<Vec<Record>, String> {
    let settings = StoreSettings::from_config(config);
    match config.store {
        StoreKind::Embedded => {
            let (store, _) = EmbeddedStore::open(Durability::from_config(config), settings)?;
            let mut r = vec![Record::Header {
                version: DUMP_VERSION,
                source: "embedded".into(),
            }];
            r.extend(store.export());
            Ok(r)
        }
        StoreKind::Redis => {
            let _in_runtime = rt.enter();
            let store = RedisStore::connect(RedisOptions::from_config(config), settings)?;
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
        }
        StoreKind::Redis => {
            let _in_runtime = rt.enter();
            let store = RedisStore::connect(RedisOptions::from_config(config), settings.clone())?;
            rt.block_on(async {
                let n = load_redis(&store, records, &settings, SystemClock.now()).await?;
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

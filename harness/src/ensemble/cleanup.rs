//! What an ensemble leaves behind, removed: a shared ensemble's servers and files when
//! the test binary exits, and the dirs of test binaries that no longer run.

use std::path::Path;
use std::sync::{Mutex, OnceLock};

use super::Ensemble;

/// Shared ensembles are never dropped: kill their servers (PDEATHSIG would, too)
/// and remove their files when the test binary exits.
pub(super) fn remove_at_exit(ensemble: &'static Ensemble) {
    static SHARED: Mutex<Vec<&'static Ensemble>> = Mutex::new(Vec::new());
    static REGISTER: OnceLock<()> = OnceLock::new();

    extern "C" fn cleanup() {
        let Ok(shared) = SHARED.try_lock() else {
            return;
        };
        for ensemble in shared.iter() {
            for s in &ensemble.servers {
                if let Ok(mut child) = s.child.try_lock() {
                    if let Some(mut c) = child.take() {
                        let _ = c.kill();
                        let _ = c.wait();
                    }
                }
            }
            let _ = std::fs::remove_dir_all(&ensemble.dir);
        }
    }

    REGISTER.get_or_init(|| unsafe {
        libc::atexit(cleanup);
    });
    SHARED.lock().unwrap().push(ensemble);
}

/// Removes `zk-recipes-<pid>-*` dirs left by test binaries that no longer run.
pub(super) fn remove_stale_dirs() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(rest) = name.strip_prefix("zk-recipes-") else {
                continue;
            };
            let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
                continue;
            };
            if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    });
}

//! Ctrl-C (SIGINT), and SIGTERM and SIGHUP (a `kill`, a closed terminal), as a flag: `roll`
//! checks it between steps and while it waits, so that a stop never leaves more Machines down
//! than the pool allows, and releases the pool's Lease. A second signal stops at once.
//! kubectl runs in its own process group meanwhile (see `Kubectl::detached`), so the
//! terminal's SIGINT does not cut a request short.

use std::sync::atomic::{AtomicBool, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

#[cfg(unix)]
extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
    // The next signal ends the process as usual. signal() is async-signal-safe.
    unsafe {
        for signal in SIGNALS {
            libc::signal(signal, libc::SIG_DFL);
        }
    }
}

#[cfg(unix)]
const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// From now on, the first SIGINT, SIGTERM or SIGHUP sets the flag instead of ending the process.
pub fn catch() {
    #[cfg(unix)]
    unsafe {
        for signal in SIGNALS {
            libc::signal(
                signal,
                on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t,
            );
        }
    }
}

/// Whether one of those signals came since [`catch`].
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

//! Ctrl-C (SIGINT) as a flag: `roll` checks it between steps and while it waits, so that a
//! stop never leaves more Machines down than the pool allows. A second Ctrl-C stops at once.
//! kubectl runs in its own process group meanwhile (see `Kubectl::detached`), so the
//! terminal's SIGINT does not cut a request short.

use std::sync::atomic::{AtomicBool, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

#[cfg(unix)]
extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
    // The next Ctrl-C ends the process as usual. signal() is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_DFL);
    }
}

/// From now on, the first SIGINT sets the flag instead of ending the process.
pub fn catch() {
    #[cfg(unix)]
    unsafe {
        libc::signal(
            libc::SIGINT,
            on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
    }
}

/// Whether SIGINT came since [`catch`].
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

//! The waPC stack, built the way Kubewarden's policy-evaluator builds it: wasmtime through
//! `wasmtime-provider`, WASI preview 1 linked with no args, env or preopened dirs, one
//! pre-instantiated module and a fresh instance (a new `WapcHost`) for every evaluation.
//!
//! Timeouts follow policy-server: epoch interruption with a background ticker, one deadline
//! for `wapc_init` and for each guest call (policy-server's default is 2 s).

use std::cell::RefCell;
use std::path::Path;
use std::sync::{Arc, Once};
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use wasmtime_provider::wasmtime;
use wasmtime_provider::{EpochDeadlines, WasmtimeEngineProviderBuilder, WasmtimeEngineProviderPre};

/// policy-server's default `--policy-timeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);

/// How often the epoch advances. The deadline is a number of ticks, so a finer tick makes the
/// effective timeout closer to the requested one.
const EPOCH_TICK: Duration = Duration::from_millis(50);

/// Text wasmtime-provider puts in the error of a guest call interrupted by the epoch deadline.
/// policy-evaluator looks for the same text (it has no typed error to match).
pub const CALL_INTERRUPTED: &str = "guest code interrupted, execution deadline exceeded";
/// Text wasmtime-provider puts in the error of a `wapc_init` interrupted by the deadline.
pub const INIT_INTERRUPTED: &str = "init interrupted, execution deadline exceeded";

/// The host side of `__host_call`: (binding, namespace, operation, payload) -> response or
/// the error string the guest receives.
pub type HostCallback =
    dyn Fn(&str, &str, &str, &[u8]) -> std::result::Result<Vec<u8>, String> + Send + Sync + 'static;

/// The engine's flags on the command line (`run`, `annotate`, `bench`).
#[derive(clap::Args, Clone, Debug)]
pub struct EngineArgs {
    /// Turn off usage of wasmtime cache.
    #[arg(long)]
    pub disable_wasmtime_cache: bool,
    /// Evaluation deadline in milliseconds (policy-server's default is 2 s); 0 disables it.
    #[arg(
        long,
        hide = true,
        env = "POLICY_HOST_TIMEOUT_MS",
        default_value_t = 2000
    )]
    pub timeout_ms: u64,
}

impl EngineArgs {
    pub fn options(&self) -> EngineOptions {
        EngineOptions {
            timeout: (self.timeout_ms > 0).then(|| Duration::from_millis(self.timeout_ms)),
            cache: !self.disable_wasmtime_cache,
        }
    }
}

#[derive(Clone, Debug)]
pub struct EngineOptions {
    /// `None` disables timeout protection.
    pub timeout: Option<Duration>,
    /// Use wasmtime's compilation cache (kwctl enables it unless `--disable-wasmtime-cache`).
    pub cache: bool,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            timeout: Some(DEFAULT_TIMEOUT),
            cache: true,
        }
    }
}

/// A compiled, pre-instantiated waPC module.
pub struct Policy {
    pre: WasmtimeEngineProviderPre,
    deadlines: Option<EpochDeadlines>,
    callback: Arc<HostCallback>,
}

impl Policy {
    pub fn from_file(
        path: &Path,
        options: &EngineOptions,
        callback: Arc<HostCallback>,
    ) -> Result<Self> {
        let bytes = std::fs::read(path)
            .with_context(|| format!("cannot read policy module {}", path.display()))?;
        Self::from_bytes(&bytes, options, callback)
            .with_context(|| format!("cannot load policy module {}", path.display()))
    }

    pub fn from_bytes(
        bytes: &[u8],
        options: &EngineOptions,
        callback: Arc<HostCallback>,
    ) -> Result<Self> {
        install_guest_logger();
        let mut config = wasmtime::Config::new();
        if options.cache {
            // A cache that cannot be set up (no writable home, ...) only costs compile time.
            if let Ok(cache) = wasmtime::Cache::new(wasmtime::CacheConfig::new()) {
                config.cache(Some(cache));
            }
        }
        if options.timeout.is_some() {
            config.epoch_interruption(true);
        }
        // policy-evaluator enables it for policies built by Go >= 1.26.
        config.wasm_function_references(true);
        let engine = wasmtime::Engine::new(&config)
            .map_err(|e| anyhow!("error when creating wasmtime engine: {e}"))?;
        let module = wasmtime::Module::new(&engine, bytes)
            .map_err(|e| anyhow!("error when building wasm module: {e:#}"))?;
        let pre = WasmtimeEngineProviderBuilder::new()
            .engine(engine.clone())
            .module(module)
            .build_pre()
            .map_err(|e| anyhow!("error when building wapc precompiled stack: {e}"))?;
        let deadlines = options.timeout.map(|timeout| {
            start_epoch_ticker(&engine);
            let ticks = timeout.as_millis().div_ceil(EPOCH_TICK.as_millis()).max(1);
            let ticks = u64::try_from(ticks).unwrap_or(u64::MAX);
            EpochDeadlines {
                wapc_init: ticks,
                wapc_func: ticks,
            }
        });
        Ok(Policy {
            pre,
            deadlines,
            callback,
        })
    }

    /// A fresh instance: new store, new memory, `wapc_init` run again.
    pub fn instantiate(&self) -> std::result::Result<Instance, wapc::errors::Error> {
        let provider = self
            .pre
            .rehydrate(self.deadlines)
            .map_err(|e| wapc::errors::Error::ProviderFailure(Box::new(e)))?;
        let callback = self.callback.clone();
        wapc::WapcHost::new(
            Box::new(provider),
            Some(Box::new(
                move |_id, binding, namespace, operation, payload| {
                    callback(binding, namespace, operation, payload).map_err(|e| e.into())
                },
            )),
        )
    }
}

/// An instance of the module: [`Instance::call`] calls a waPC guest function. What the guest
/// sends with `__console_log` meanwhile is kept for [`take_guest_logs`].
pub type Instance = wapc::WapcHost;

/// Advances the engine's epoch every [`EPOCH_TICK`] until the engine is dropped.
fn start_epoch_ticker(engine: &wasmtime::Engine) {
    let weak = engine.weak();
    std::thread::spawn(move || loop {
        std::thread::sleep(EPOCH_TICK);
        match weak.upgrade() {
            Some(engine) => engine.increment_epoch(),
            None => return,
        }
    });
}

// ---------------------------------------------------------------------------------------------
// Guest console_log capture. The wapc crate forwards `__console_log` to the `log` crate
// (`info!("Guest module {id}: {msg}")`); a small logger keeps those messages per thread (the
// guest runs on the calling thread) so the caller can show them, e.g. a panic message sent
// just before the module traps.

thread_local! {
    static GUEST_LOGS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

struct GuestLogger;

impl log::Log for GuestLogger {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.target().starts_with("wapc") && metadata.level() <= log::Level::Info
    }

    fn log(&self, record: &log::Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let line = record.args().to_string();
        if let Some(message) = line
            .strip_prefix("Guest module ")
            .and_then(|rest| rest.split_once(": "))
            .map(|(_, message)| message.to_string())
        {
            GUEST_LOGS.with(|logs| logs.borrow_mut().push(message));
        }
    }

    fn flush(&self) {}
}

/// Installs the console_log capture (once per process). If the process already has another
/// `log` logger, capture is simply unavailable.
pub fn install_guest_logger() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        if log::set_logger(&GuestLogger).is_ok() {
            log::set_max_level(log::LevelFilter::Info);
        }
    });
}

/// Takes (and clears) the console_log messages the guest sent on this thread.
pub fn take_guest_logs() -> Vec<String> {
    GUEST_LOGS.with(|logs| std::mem::take(&mut *logs.borrow_mut()))
}

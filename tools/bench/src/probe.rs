//! Guest memory per evaluation. `WapcHost` keeps its wasmtime store private, so this is a
//! second, minimal waPC host straight on wasmtime (same WASI preview 1 linking, same call
//! sequence: instantiate, `_start`/`wapc_init`, `__guest_call`) that can read the size of the
//! guest's exported `memory` after the call. Linear memory never shrinks, so its size after
//! the call is the evaluation's peak.

use std::sync::Arc;

use anyhow::{anyhow, ensure, Context, Result};
use wasmtime_provider::wasmtime::{self, Caller, Engine, Extern, Linker, Module, Store};
use wasmtime_provider::wasmtime_wasi;

use policy_host::engine::HostCallback;

struct ProbeState {
    wasi: wasmtime_wasi::p1::WasiP1Ctx,
    operation: Vec<u8>,
    payload: Vec<u8>,
    response: Option<Vec<u8>>,
    error: Option<String>,
    /// Answers the guest's `__host_call` (the pool list of the fleet benchmark).
    host: Option<Arc<HostCallback>>,
    /// The last host call's answer: [response, error], one of them empty.
    host_answer: [Vec<u8>; 2],
}

/// Linear memory sizes of one evaluation on a fresh instance.
#[derive(Clone, Debug)]
pub struct MemoryUse {
    /// After instantiation and `wapc_init`, before the call.
    pub initial_bytes: u64,
    /// After `validate` returned: the evaluation's peak.
    pub after_call_bytes: u64,
    /// The guest's answer.
    pub response: Vec<u8>,
}

pub struct MemoryProbe {
    engine: Engine,
    linker: Linker<ProbeState>,
    module: Module,
}

impl MemoryProbe {
    pub fn new(module_bytes: &[u8]) -> Result<MemoryProbe> {
        Self::with_perf_map(module_bytes, false)
    }

    /// With `perf_map`, wasmtime writes `/tmp/perf-<pid>.map` (address, size, name of every
    /// compiled function) so a profile of the JIT code can be read by function name; the
    /// names come from the module's `name` section (a build with `strip = false`).
    pub fn with_perf_map(module_bytes: &[u8], perf_map: bool) -> Result<MemoryProbe> {
        let mut config = wasmtime::Config::new();
        config.wasm_function_references(true);
        if perf_map {
            config.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        let engine = Engine::new(&config).map_err(|e| anyhow!("wasmtime engine: {e}"))?;
        let module =
            Module::new(&engine, module_bytes).map_err(|e| anyhow!("cannot compile: {e:#}"))?;
        let mut linker: Linker<ProbeState> = Linker::new(&engine);
        wasmtime_wasi::p1::add_to_linker_sync(&mut linker, |s: &mut ProbeState| &mut s.wasi)
            .map_err(|e| anyhow!("cannot link WASI: {e}"))?;
        add_wapc_imports(&mut linker).map_err(|e| anyhow!("cannot link waPC: {e}"))?;
        Ok(MemoryProbe {
            engine,
            linker,
            module,
        })
    }

    /// Calls `validate` with `payload` on a fresh instance and reports its memory; `host`
    /// answers the guest's host calls (without one, every host call fails).
    pub fn measure(&self, payload: &[u8], host: Option<Arc<HostCallback>>) -> Result<MemoryUse> {
        let operation = "validate";
        let state = ProbeState {
            wasi: wasmtime_wasi::WasiCtxBuilder::new().build_p1(),
            operation: operation.as_bytes().to_vec(),
            payload: payload.to_vec(),
            response: None,
            error: None,
            host,
            host_answer: Default::default(),
        };
        let mut store = Store::new(&self.engine, state);
        let instance = self
            .linker
            .instantiate(&mut store, &self.module)
            .map_err(|e| anyhow!("cannot instantiate: {e:#}"))?;
        for start in ["_start", "wapc_init"] {
            if let Ok(init) = instance.get_typed_func::<(), ()>(&mut store, start) {
                init.call(&mut store, ())
                    .map_err(|e| anyhow!("{start} failed: {e:#}"))?;
            }
        }
        let memory = instance
            .get_memory(&mut store, "memory")
            .context("the module exports no memory")?;
        let initial_bytes = memory.data_size(&store) as u64;
        let guest_call = instance
            .get_typed_func::<(i32, i32), i32>(&mut store, "__guest_call")
            .map_err(|e| anyhow!("no __guest_call: {e}"))?;
        let operation_len = i32::try_from(operation.len())?;
        let payload_len = i32::try_from(payload.len())?;
        let status = guest_call
            .call(&mut store, (operation_len, payload_len))
            .map_err(|e| anyhow!("{operation} trapped: {e:#}"))?;
        let after_call_bytes = memory.data_size(&store) as u64;
        let state = store.data_mut();
        let error = state.error.take().unwrap_or_default();
        ensure!(status == 1, "{operation} failed: {error}");
        let response = state
            .response
            .take()
            .context("the guest sent no response")?;
        Ok(MemoryUse {
            initial_bytes,
            after_call_bytes,
            response,
        })
    }
}

fn guest_memory(caller: &mut Caller<'_, ProbeState>) -> wasmtime::Result<wasmtime::Memory> {
    match caller.get_export("memory") {
        Some(Extern::Memory(memory)) => Ok(memory),
        _ => Err(wasmtime::Error::msg("the guest exports no memory")),
    }
}

fn read(caller: &mut Caller<'_, ProbeState>, ptr: i32, len: i32) -> wasmtime::Result<Vec<u8>> {
    let memory = guest_memory(caller)?;
    let start = usize::try_from(ptr)?;
    let end = start + usize::try_from(len)?;
    memory
        .data(&caller)
        .get(start..end)
        .map(<[u8]>::to_vec)
        .ok_or_else(|| wasmtime::Error::msg("guest pointer out of bounds"))
}

fn write(caller: &mut Caller<'_, ProbeState>, ptr: i32, bytes: &[u8]) -> wasmtime::Result<()> {
    let memory = guest_memory(caller)?;
    memory.write(caller, usize::try_from(ptr)?, bytes)?;
    Ok(())
}

fn read_text(caller: &mut Caller<'_, ProbeState>, ptr: i32, len: i32) -> wasmtime::Result<String> {
    Ok(String::from_utf8_lossy(&read(caller, ptr, len)?).into_owned())
}

/// The waPC host functions. `__host_call` goes to the probe's host callback, when it has one
/// (as policy-server's), and fails otherwise.
fn add_wapc_imports(linker: &mut Linker<ProbeState>) -> wasmtime::Result<()> {
    linker
        .func_wrap(
            "wapc",
            "__guest_request",
            |mut caller: Caller<'_, ProbeState>, operation_ptr: i32, payload_ptr: i32| {
                let operation = caller.data().operation.clone();
                let payload = caller.data().payload.clone();
                write(&mut caller, operation_ptr, &operation)?;
                write(&mut caller, payload_ptr, &payload)
            },
        )?
        .func_wrap(
            "wapc",
            "__guest_response",
            |mut caller: Caller<'_, ProbeState>, ptr: i32, len: i32| {
                let bytes = read(&mut caller, ptr, len)?;
                caller.data_mut().response = Some(bytes);
                Ok(())
            },
        )?
        .func_wrap(
            "wapc",
            "__guest_error",
            |mut caller: Caller<'_, ProbeState>, ptr: i32, len: i32| {
                let bytes = read(&mut caller, ptr, len)?;
                caller.data_mut().error = Some(String::from_utf8_lossy(&bytes).into_owned());
                Ok(())
            },
        )?
        .func_wrap(
            "wapc",
            "__console_log",
            |_: Caller<'_, ProbeState>, _ptr: i32, _len: i32| {},
        )?
        .func_wrap(
            "wapc",
            "__host_call",
            |mut caller: Caller<'_, ProbeState>,
             binding_ptr: i32,
             binding_len: i32,
             namespace_ptr: i32,
             namespace_len: i32,
             operation_ptr: i32,
             operation_len: i32,
             payload_ptr: i32,
             payload_len: i32|
             -> wasmtime::Result<i32> {
                let binding = read_text(&mut caller, binding_ptr, binding_len)?;
                let namespace = read_text(&mut caller, namespace_ptr, namespace_len)?;
                let operation = read_text(&mut caller, operation_ptr, operation_len)?;
                let payload = read(&mut caller, payload_ptr, payload_len)?;
                let answer = match caller.data().host.clone() {
                    Some(host) => host(&binding, &namespace, &operation, &payload),
                    None => Err("the memory probe has no host".to_string()),
                };
                let (status, answer) = match answer {
                    Ok(response) => (1, [response, Vec::new()]),
                    Err(error) => (0, [Vec::new(), error.into_bytes()]),
                };
                caller.data_mut().host_answer = answer;
                Ok(status)
            },
        )?;
    // `__host_response` and `__host_error` copy the answer into the guest, `..._len` its size.
    for (index, name) in ["__host_response", "__host_error"].into_iter().enumerate() {
        linker.func_wrap(
            "wapc",
            name,
            move |mut caller: Caller<'_, ProbeState>, ptr: i32| {
                let bytes = std::mem::take(&mut caller.data_mut().host_answer[index]);
                write(&mut caller, ptr, &bytes)
            },
        )?;
        linker.func_wrap(
            "wapc",
            &format!("{name}_len"),
            move |caller: Caller<'_, ProbeState>| -> i32 {
                i32::try_from(caller.data().host_answer[index].len()).unwrap_or(i32::MAX)
            },
        )?;
    }
    Ok(())
}

//! `policy-host bench`: kwctl's `bench` for a local module (kwctl `cli/bench.rs`,
//! `command/bench.rs`): the same flags, the same two tiny-bench runs labelled
//! `validate_settings` and `validate`, the same output, so the numbers compare with
//! `kwctl bench` on the same machine.
//!
//! Like kwctl, it builds one instance and calls it over and over. policy-server instead
//! evaluates every request on a fresh instance; `--fresh-instance` measures that (an
//! extension of this host, not a kwctl flag).

use std::time::Duration;

use anyhow::{anyhow, Result};
use clap::Args;
use tiny_bench::{bench_with_configuration_labeled, BenchmarkConfig};

use crate::engine;
use crate::run::{self, RunArgs, RunReport};

/// The flags of `kwctl bench` that apply to a local waPC module.
#[derive(Args, Clone, Debug)]
pub struct BenchArgs {
    /// How long the bench 'should' run, num_samples is prioritized so benching will take
    /// longer to be able to collect num_samples if the code to be benched is slower than this
    /// time limit allowed.
    #[arg(long, value_name = "SECONDS")]
    pub measurement_time: Option<u64>,
    /// How many resamples should be done.
    #[arg(long, value_name = "NUM")]
    pub num_resamples: Option<usize>,
    /// How many samples should be collected. Recommended at least 50, above 100 doesn't seem
    /// to yield a significantly different result.
    #[arg(long, value_name = "NUM")]
    pub num_samples: Option<usize>,
    /// How long the bench should warm up.
    #[arg(long, value_name = "SECONDS")]
    pub warm_up_time: Option<u64>,
    /// Puts results in target/simple-bench/<label>/ if a target directory can be found above
    /// this program, and compares with the previous run.
    #[arg(long)]
    pub dump_results_to_disk: bool,
    /// Evaluate every request on a fresh instance, as policy-server does (kwctl reuses one).
    #[arg(long)]
    pub fresh_instance: bool,
    #[command(flatten)]
    pub run: RunArgs,
}

impl BenchArgs {
    /// kwctl's `create_benchmark_config`: tiny-bench's defaults (5 s measurement, 3 s warm-up,
    /// 100 samples, 100 000 resamples) unless a flag says otherwise; nothing written to disk
    /// without `--dump-results-to-disk`. (kwctl 1.x stores `--num-samples` in the resample
    /// count by mistake; here it sets the number of samples, as its help says.)
    pub fn benchmark_config(&self) -> BenchmarkConfig {
        let mut config = BenchmarkConfig::default();
        if let Some(seconds) = self.measurement_time {
            config.measurement_time = Duration::from_secs(seconds);
        }
        if let Some(resamples) = self.num_resamples {
            config.num_resamples = resamples;
        }
        if let Some(samples) = self.num_samples {
            config.num_samples = samples.max(1);
        }
        if let Some(seconds) = self.warm_up_time {
            config.warm_up_time = Duration::from_secs(seconds);
        }
        config.dump_results_to_disk = self.dump_results_to_disk;
        config
    }
}

/// Loads the module as `run` does (settings refused by the policy are an error), then
/// benchmarks `validate_settings` and `validate`, printing tiny-bench's report of each.
pub fn bench(args: &BenchArgs, report: &mut RunReport) -> Result<()> {
    let loaded = run::load(&args.run.options(), report)?;
    let config = args.benchmark_config();
    let (policy, request, settings) = (&loaded.policy, &loaded.request, &loaded.settings);
    if args.fresh_instance {
        bench_with_configuration_labeled("validate_settings", &config, || {
            policy
                .instantiate()
                .map(|instance| run::validate_settings(&instance, settings))
        });
        bench_with_configuration_labeled("validate", &config, || {
            run::validate(policy, request, settings)
        });
    } else {
        let instance = policy
            .instantiate()
            .map_err(|e| anyhow!("unable to rehydrate wapc module: cannot build Wapc host: {e}"))?;
        bench_with_configuration_labeled("validate_settings", &config, || {
            run::validate_settings(&instance, settings)
        });
        bench_with_configuration_labeled("validate", &config, || {
            run::validate_on(&instance, request, settings)
        });
    }
    report.guest_logs.extend(engine::take_guest_logs());
    Ok(())
}

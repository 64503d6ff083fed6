//! `playground-examples SCENARIOS_DIR OUTPUT.json`: the e2e scenarios the playground answers as
//! they expect, as the page's examples. Names the ones left out (and why) on stderr.

use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, output] = args.as_slice() else {
        eprintln!("usage: playground-examples SCENARIOS_DIR OUTPUT.json");
        return ExitCode::from(2);
    };
    let found = match capi_rollout_playground::examples::collect(Path::new(dir)) {
        Ok(found) => found,
        Err(e) => {
            eprintln!("playground-examples: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (offered, left_out) = (found.offered, found.left_out);
    let json = match serde_json::to_string(&offered) {
        Ok(json) => json,
        Err(e) => {
            eprintln!("playground-examples: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = std::fs::write(output, json + "\n") {
        eprintln!("playground-examples: {output}: {e}");
        return ExitCode::FAILURE;
    }
    for (name, why) in &left_out {
        eprintln!("playground-examples: not offered: {name}: {why}");
    }
    eprintln!(
        "playground-examples: {} examples in {output}, {} scenarios left out",
        offered.len(),
        left_out.len()
    );
    ExitCode::SUCCESS
}

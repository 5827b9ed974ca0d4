//! What a look of the liveness rule costs: `FILES` metrics files in `DIR`
//! (made if missing, no process holding them) and `PROCS` other processes
//! on the machine (`sleep`, started here), `Liveness::walk_now` timed
//! `REPEAT` times. Run as the files' owner (or root), each look asks the
//! kernel (a read lease per file); run as another user without
//! `CAP_LEASE`, it walks every process's `/proc/<pid>/maps` and `fd`
//! (`docs/benchmarks.md`, "Liveness").
//!
//! ```sh
//! cargo run --release -p multiprom-maintain --example liveness_walk -- /dev/shm/lw 4000 1000 20
//! ```

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use multiprom_maintain::Liveness;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(dir), Some(files), Some(procs), Some(repeat)) = (
        args.first().map(PathBuf::from),
        args.get(1).and_then(|n| n.parse::<usize>().ok()),
        args.get(2).and_then(|n| n.parse::<usize>().ok()),
        args.get(3).and_then(|n| n.parse::<usize>().ok()),
    ) else {
        eprintln!("usage: liveness_walk DIR FILES PROCS REPEAT");
        std::process::exit(2);
    };
    if std::fs::create_dir_all(&dir).is_err() {
        eprintln!("cannot create {}", dir.display());
        std::process::exit(2);
    }
    for i in 0..files {
        let path = dir.join(format!("counter_{}.db", 1_000_000 + i));
        if !path.exists() && std::fs::write(&path, [0u8; 4096]).is_err() {
            eprintln!("cannot write {}", path.display());
            std::process::exit(2);
        }
    }
    let mut sleepers: Vec<Child> = (0..procs)
        .filter_map(|_| {
            Command::new("sleep")
                .arg("600")
                .stdin(Stdio::null())
                .spawn()
                .ok()
        })
        .collect();
    let liveness = Liveness::new(&dir).assume_writers_visible(true);
    let mut times: Vec<Duration> = (0..repeat.max(1))
        .map(|_| {
            let start = Instant::now();
            liveness.walk_now();
            start.elapsed()
        })
        .collect();
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{files} files, {} processes on the machine: a look takes min {:.2} ms, median {:.2} ms, max {:.2} ms; {}",
        std::fs::read_dir("/proc")
            .map(|d| d
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
                .count())
            .unwrap_or(0),
        ms(times[0]),
        ms(times[times.len() / 2]),
        ms(times[times.len() - 1]),
        liveness.state()
    );
    for sleeper in &mut sleepers {
        let _ = sleeper.kill();
        let _ = sleeper.wait();
    }
}

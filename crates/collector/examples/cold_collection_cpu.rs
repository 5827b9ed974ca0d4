//! What a cold collection costs in wall time and in processor time.
//!
//! A cold collection is a new [`DirCollector`]'s first `collect` and the
//! encoding of its result: what a process's first scrape of a directory
//! costs. This program makes one new collector per round, times the
//! collection and encoding, and adds up the processor time the process
//! spent in them, in user space and in the kernel, on every thread (the
//! reading threads included). Each collector is dropped outside the clock.
//!
//! The sum is what bounds the wall time from below on a given number of
//! cores: `(user + system) / cores`, reached only if every core is busy for
//! the whole collection.
//!
//! ```sh
//! cargo run --release -p multiprom-collector --example cold_collection_cpu -- DIR [ROUNDS]
//! ```
//!
//! Linux only (processor times from `/proc/self/stat`, in clock ticks:
//! summed over the rounds, not read per round). It reads the files and
//! changes nothing.

use std::error::Error;
use std::time::Instant;

use multiprom_collector::{DirCollector, Format};

/// The process's user and system time so far, in clock ticks.
fn cpu_ticks() -> Result<(u64, u64), Box<dyn Error>> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    // The command name (field 2) is in parentheses and may hold spaces;
    // the fields after its closing one start at field 3 (state).
    let after = stat
        .rsplit_once(')')
        .ok_or("/proc/self/stat: no command name")?
        .1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime are fields 14 and 15: the 12th and 13th after it.
    let field = |at: usize| -> Result<u64, Box<dyn Error>> {
        Ok(fields
            .get(at)
            .ok_or("/proc/self/stat: too few fields")?
            .parse()?)
    };
    Ok((field(11)?, field(12)?))
}

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args_os().skip(1);
    let dir = args
        .next()
        .ok_or("usage: cold_collection_cpu DIR [ROUNDS]")?;
    let rounds: usize = match args.next() {
        Some(n) => n
            .to_str()
            .and_then(|n| n.parse().ok())
            .ok_or("ROUNDS: not a number")?,
        None => 40,
    };
    if rounds == 0 {
        return Err("ROUNDS: at least 1".into());
    }
    let tick_ms = 1000.0 / rustix::param::clock_ticks_per_second() as f64;

    let mut walls = Vec::with_capacity(rounds);
    let (mut user, mut system) = (0, 0);
    let mut files = 0;
    for _ in 0..rounds {
        let collector = DirCollector::new(&dir);
        let (user_before, system_before) = cpu_ticks()?;
        let start = Instant::now();
        let scrape = collector.collect()?;
        let text = scrape.encode(Format::Prometheus);
        let wall = start.elapsed();
        let (user_after, system_after) = cpu_ticks()?;
        std::hint::black_box(&text);
        user += user_after - user_before;
        system += system_after - system_before;
        walls.push(wall.as_secs_f64() * 1e3);
        files = scrape.files.len();
        drop((scrape, collector));
    }
    walls.sort_by(f64::total_cmp);
    let per_round = |ticks: u64| ticks as f64 * tick_ms / rounds as f64;
    let (user, system) = (per_round(user), per_round(system));
    println!(
        "{files} files, {rounds} cold collections with encoding\n\
         wall:      best {:.2} ms, median {:.2} ms\n\
         processor: user {user:.1} ms + system {system:.1} ms = {:.1} ms per collection",
        walls[0],
        walls[rounds / 2],
        user + system,
    );
    Ok(())
}

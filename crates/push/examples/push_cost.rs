//! Where a push's time goes, stage by stage, against a warm scrape's
//! stages on the same directory (docs/benchmarks.md, "Pushing"): a warm
//! whole collection (with native histograms and exemplars, and the start
//! times), the text encoding of the same families from scratch (no line
//! cache: what a scrape's encoding costs when every value moved), and each
//! push body: Remote-Write (built as messages and encoded, then snappy; as
//! the pusher writes it, with snappy) and OTLP (as the pusher writes it,
//! then gzip).
//!
//! Usage: cargo run --release -p multiprom-push --example push_cost -- DIR [ROUNDS]

use std::io::Write;
use std::time::{Duration, Instant};

use multiprom_collector::{DirCollector, Exemplars, Format, Natives, ServedView};
use multiprom_push::otlp::{OtlpEncoder, Temporality};
use multiprom_push::remote_write;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = args.next().ok_or("usage: push_cost DIR [ROUNDS]")?;
    let rounds: u32 = args.next().map_or(Ok(50), |r| r.parse())?;
    let view = ServedView::new(DirCollector::new(&dir));
    for _ in 0..3 {
        view.collect_all(Natives::Merge, Exemplars::Attach)?;
    }
    let mut otlp = OtlpEncoder::new(
        vec![("service.name".into(), "bench".into())],
        Temporality::Cumulative,
    );
    let mut times = [Duration::ZERO; 10];
    let mut writer = remote_write::BodyWriter::default();
    let mut sizes = (0, 0);
    for _ in 0..rounds {
        let t = Instant::now();
        let text_scrape = view.collect(None, Natives::Skip, Exemplars::Skip)?;
        times[7] += t.elapsed();
        let t = Instant::now();
        view.start_times(&text_scrape, false);
        times[8] += t.elapsed();
        let t = Instant::now();
        let served = view.collect_all(Natives::Merge, Exemplars::Attach)?;
        times[0] += t.elapsed();
        let t = Instant::now();
        let mut text = String::new();
        Format::Prometheus.encode(&served.scrape.families, &mut text);
        times[1] += t.elapsed();
        let t = Instant::now();
        let request = remote_write::write_request(&served);
        times[2] += t.elapsed();
        let t = Instant::now();
        let body = remote_write::encode(&request);
        times[3] += t.elapsed();
        sizes.0 = body.len();
        let t = Instant::now();
        let written = writer.body(&served);
        times[9] += t.elapsed();
        assert_eq!(written, body);
        let t = Instant::now();
        let bytes = otlp.encode(&served);
        times[4] += t.elapsed();
        let t = Instant::now();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(bytes)?;
        sizes.1 = gz.finish()?.len();
        times[6] += t.elapsed();
    }
    let ms = |d: Duration| d.as_secs_f64() * 1000.0 / f64::from(rounds);
    println!("{dir}: {rounds} rounds, ms each");
    println!(
        "  warm collection for text (no natives, no exemplars):      {:.3}",
        ms(times[7])
    );
    println!(
        "  start times, looked up:                                   {:.3}",
        ms(times[8])
    );
    println!(
        "  warm whole collection (natives, exemplars, start times): {:.3}",
        ms(times[0])
    );
    println!(
        "  text encoding from scratch:                               {:.3}",
        ms(times[1])
    );
    println!(
        "  Remote-Write messages:                                    {:.3}",
        ms(times[2])
    );
    println!(
        "  Remote-Write protobuf + snappy ({} bytes):            {:.3}",
        sizes.0,
        ms(times[3])
    );
    println!(
        "  Remote-Write body as the pusher writes it:                 {:.3}",
        ms(times[9])
    );
    println!(
        "  OTLP protobuf:                                            {:.3}",
        ms(times[4])
    );
    println!(
        "  OTLP gzip ({} bytes):                                 {:.3}",
        sizes.1,
        ms(times[6])
    );
    Ok(())
}

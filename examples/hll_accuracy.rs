//! Accuracy of `sketch::Hll` counts: mean and maximum relative error at
//! 10 .. 1e6 distinct elements, 20 independent trials each, printed as a
//! Markdown table. Run with `cargo run --release --example hll_accuracy`.

use hotrank::sketch::Hll;

const TRIALS: u64 = 20;
const SIZES: [u64; 6] = [10, 100, 1_000, 10_000, 100_000, 1_000_000];

fn main() {
    println!(
        "| distinct elements | trials | mean relative error | max relative error | final encoding |"
    );
    println!("|---:|---:|---:|---:|---|");
    for &n in &SIZES {
        let mut sum = 0.0f64;
        let mut max = 0.0f64;
        let mut sparse = 0;
        for trial in 0..TRIALS {
            let mut h = Hll::new();
            for i in 0..n {
                // Distinct elements, different in every trial.
                h.add(format!("t{trial}:element:{i}").as_bytes());
            }
            if h.is_sparse() {
                sparse += 1;
            }
            let est = h.count() as f64;
            let err = (est - n as f64).abs() / n as f64;
            sum += err;
            max = max.max(err);
        }
        let enc = match sparse {
            0 => "dense".to_string(),
            s if s == TRIALS => "sparse".to_string(),
            s => format!("{s} sparse / {} dense", TRIALS - s),
        };
        println!(
            "| {n} | {TRIALS} | {:.3}% | {:.3}% | {enc} |",
            100.0 * sum / TRIALS as f64,
            100.0 * max
        );
    }
}

//! The simulated GPU source: per-GPU series that follow a named pattern and
//! depend only on (GPU, time), so a test, a demo and a second server all see
//! the same numbers. Values are whole, as NVML reports them.

/// How a simulated machine's GPUs behave.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SimPattern {
    /// Nothing running: near 0 %, cool.
    Idle,
    /// A steady training job: 75–88 %, warm, memory mostly full.
    Training,
    /// Interactive work: short bursts of load, idle in between.
    Notebook,
    /// Saturated and hot: ~100 %, memory full, throttling at the top.
    Hot,
}

impl SimPattern {
    pub const ALL: [SimPattern; 4] = [SimPattern::Idle, SimPattern::Training, SimPattern::Notebook, SimPattern::Hot];

    pub fn parse(s: &str) -> Option<SimPattern> {
        SimPattern::ALL.into_iter().find(|p| p.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SimPattern::Idle => "idle",
            SimPattern::Training => "training",
            SimPattern::Notebook => "notebook",
            SimPattern::Hot => "hot",
        }
    }
}

/// One simulated reading.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimReading {
    pub util_pct: f64,
    pub mem_used_mb: i64,
    pub temp_c: f64,
    pub power_w: f64,
    pub throttled: bool,
}

/// Notebook bursts: in each 15-minute cycle, 3 minutes of work.
const CYCLE_MS: i64 = 15 * 60_000;
const BURST_MS: i64 = 3 * 60_000;

/// The reading of GPU `gpu_id` at `at_ms` under `pattern` (None: the GPU is
/// free, which reads as idle). Noise changes every 10 s, so samples taken at
/// any interval within one 10 s step agree.
pub fn simulate(pattern: Option<SimPattern>, gpu_id: i64, at_ms: i64, mem_total_mb: i64) -> SimReading {
    let step = at_ms.div_euclid(10_000);
    let noise = |salt: u64, span: i64| (mix(gpu_id as u64, step as u64, salt) % (span as u64 + 1)) as i64;
    let total = mem_total_mb.max(1);
    let (util, mem_frac_pct, temp, power) = match pattern.unwrap_or(SimPattern::Idle) {
        SimPattern::Idle => (noise(1, 1), 1, 31 + noise(2, 3), 55 + noise(3, 5)),
        SimPattern::Training => (75 + noise(1, 13), 70 + noise(2, 5), 66 + noise(3, 6), 280 + noise(4, 40)),
        SimPattern::Notebook => {
            // Each GPU's cycle is offset so a cluster's notebooks do not
            // burst in lockstep.
            let phase = (at_ms + (gpu_id * 97_000)).rem_euclid(CYCLE_MS);
            if phase < BURST_MS {
                (55 + noise(1, 45), 30 + noise(2, 10), 60 + noise(3, 10), 200 + noise(4, 120))
            } else {
                (noise(1, 3), 25 + noise(2, 3), 38 + noise(3, 4), 70 + noise(4, 15))
            }
        }
        SimPattern::Hot => (97 + noise(1, 3), 93 + noise(2, 5), 84 + noise(3, 7), 380 + noise(4, 40)),
    };
    SimReading {
        util_pct: util as f64,
        mem_used_mb: total * mem_frac_pct / 100,
        temp_c: temp as f64,
        power_w: power as f64,
        throttled: temp >= 89,
    }
}

/// A small, well-spread hash (splitmix64's finaliser) of the inputs.
fn mix(a: u64, b: u64, salt: u64) -> u64 {
    let mut z = a.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ b.wrapping_add(salt.wrapping_mul(0xD1B5_4A32_D192_ED03));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 24 * 3_600_000;

    fn series(p: Option<SimPattern>, gpu: i64) -> Vec<SimReading> {
        (0..DAY / 10_000).map(|i| simulate(p, gpu, 1_700_000_000_000 + i * 10_000, 81_920)).collect()
    }

    fn mean_util(s: &[SimReading]) -> f64 {
        s.iter().map(|r| r.util_pct).sum::<f64>() / s.len() as f64
    }

    #[test]
    fn the_same_gpu_and_time_always_read_the_same() {
        for p in SimPattern::ALL {
            assert_eq!(simulate(Some(p), 3, 123_456_789, 81_920), simulate(Some(p), 3, 123_456_789, 81_920));
            // Anywhere within the same 10 s step.
            assert_eq!(simulate(Some(p), 3, 123_450_000, 81_920), simulate(Some(p), 3, 123_459_999, 81_920));
        }
        assert_ne!(series(Some(SimPattern::Training), 1), series(Some(SimPattern::Training), 2));
    }

    #[test]
    fn patterns_have_their_shapes() {
        let idle = series(Some(SimPattern::Idle), 1);
        assert!(idle.iter().all(|r| r.util_pct < 5.0 && !r.throttled));
        let training = series(Some(SimPattern::Training), 1);
        assert!(training.iter().all(|r| (75.0..90.0).contains(&r.util_pct)));
        let hot = series(Some(SimPattern::Hot), 1);
        assert!(hot.iter().all(|r| r.util_pct >= 90.0 && r.mem_used_mb >= 81_920 * 93 / 100));
        assert!(hot.iter().any(|r| r.throttled) && training.iter().all(|r| !r.throttled));
        let notebook = series(Some(SimPattern::Notebook), 1);
        let busy = notebook.iter().filter(|r| r.util_pct >= 55.0).count();
        // 3 minutes in 15: a fifth of the samples are bursts.
        assert_eq!(busy, notebook.len() / 5);
        assert!(mean_util(&idle) < mean_util(&notebook) && mean_util(&notebook) < mean_util(&training));
        assert!(mean_util(&training) < mean_util(&hot));
    }

    #[test]
    fn a_free_gpu_reads_as_idle_and_values_stay_in_range() {
        assert_eq!(simulate(None, 5, 42_000, 1000), simulate(Some(SimPattern::Idle), 5, 42_000, 1000));
        for p in SimPattern::ALL {
            for r in series(Some(p), 9) {
                assert!((0.0..=100.0).contains(&r.util_pct) && r.util_pct.fract() == 0.0);
                assert!(r.mem_used_mb <= 81_920 && r.temp_c.fract() == 0.0 && r.power_w > 0.0);
            }
        }
        assert_eq!(SimPattern::parse("hot"), Some(SimPattern::Hot));
        assert_eq!(SimPattern::parse("HOT"), None);
    }
}

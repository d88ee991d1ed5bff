//! A small deterministic generator (splitmix64) for the tests that draw
//! random numbers: every one prints its seed, and `TURNBACK_SEED=N`
//! replays a run.
#![allow(dead_code)]

/// The generator.
pub struct Rng(u64);

/// The seed of a run of `test`: `TURNBACK_SEED`, else the clock; printed
/// with how to replay it.
pub fn env_seed(test: &str) -> u64 {
    let seed = std::env::var("TURNBACK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
    println!("{test}: seed {seed} (replay with TURNBACK_SEED={seed})");
    seed
}

impl Rng {
    /// Seeded by [`env_seed`].
    pub fn from_env(test: &str) -> Rng {
        Rng(env_seed(test))
    }

    pub fn seeded(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// An index in `0..n` (`n > 0`).
    pub fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }

    /// One of `v` (not empty).
    pub fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.index(v.len())]
    }
}

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// A token bucket per client: `capacity` tokens, refilled at `rate_per_second`.
pub struct Limiter {
    capacity: f64,
    rate_per_second: f64,
    buckets: HashMap<String, Bucket>,
}

struct Bucket {
    tokens: f64,
    updated: Instant,
}

impl Limiter {
    pub fn new(capacity: f64, rate_per_second: f64) -> Self {
        assert!(capacity > 0.0 && rate_per_second > 0.0);
        Self { capacity, rate_per_second, buckets: HashMap::new() }
    }

    /// Takes `cost` tokens for `client` if they are there; otherwise returns
    /// how long to wait until they will be.
    pub fn take(&mut self, client: &str, cost: f64, now: Instant) -> Result<(), Duration> {
        let bucket = self
            .buckets
            .entry(client.to_owned())
            .or_insert(Bucket { tokens: self.capacity, updated: now });
        let elapsed = now.saturating_duration_since(bucket.updated).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * self.rate_per_second).min(self.capacity);
        bucket.updated = now;
        if bucket.tokens >= cost {
            bucket.tokens -= cost;
            Ok(())
        } else {
            let missing = cost - bucket.tokens;
            Err(Duration::from_secs_f64(missing / self.rate_per_second))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refills_over_time() {
        let mut limiter = Limiter::new(10.0, 5.0);
        let start = Instant::now();
        assert!(limiter.take("a", 10.0, start).is_ok());
        assert_eq!(limiter.take("a", 5.0, start), Err(Duration::from_secs(1)));
        assert!(limiter.take("a", 5.0, start + Duration::from_secs(1)).is_ok());
    }
}

//! Backoff (SPEC §7.3): 1 s, doubling up to 5 minutes, reset by a success.

use std::time::Duration;

/// The schedule of waits after failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffPolicy {
    /// The first wait.
    pub initial: Duration,
    /// The longest wait.
    pub max: Duration,
}

impl Default for BackoffPolicy {
    /// 1 s doubling to 5 minutes.
    fn default() -> BackoffPolicy {
        BackoffPolicy { initial: Duration::from_secs(1), max: Duration::from_secs(300) }
    }
}

/// One sink's place in its backoff schedule.
#[derive(Debug, Clone)]
pub struct Backoff {
    policy: BackoffPolicy,
    next: Duration,
}

impl Backoff {
    /// A schedule at its start.
    pub fn new(policy: BackoffPolicy) -> Backoff {
        Backoff { policy, next: policy.initial.min(policy.max) }
    }

    /// The wait after one more failure; the following one doubles, up to the maximum.
    pub fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = delay.saturating_mul(2).min(self.policy.max);
        delay
    }

    /// Back to the start, after a success.
    pub fn reset(&mut self) {
        self.next = self.policy.initial.min(self.policy.max);
    }

    /// The wait after one more failure, raised to what the receiver asked for (capped by the maximum).
    pub fn next_delay_at_least(&mut self, asked: Option<Duration>) -> Duration {
        let delay = self.next_delay();
        asked.map_or(delay, |asked| delay.max(asked.min(self.policy.max)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_from_one_second_to_five_minutes_and_resets() {
        let mut backoff = Backoff::new(BackoffPolicy::default());
        let waits: Vec<u64> = (0..12).map(|_| backoff.next_delay().as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
        backoff.reset();
        assert_eq!(backoff.next_delay(), Duration::from_secs(1));
    }

    #[test]
    fn a_receiver_can_ask_for_longer_but_not_beyond_the_maximum() {
        let mut backoff = Backoff::new(BackoffPolicy::default());
        assert_eq!(backoff.next_delay_at_least(Some(Duration::from_secs(30))), Duration::from_secs(30));
        assert_eq!(backoff.next_delay_at_least(None), Duration::from_secs(2), "the schedule itself goes on");
        assert_eq!(backoff.next_delay_at_least(Some(Duration::from_secs(3600))), Duration::from_secs(300));
    }
}

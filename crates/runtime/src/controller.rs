//! Backlog controllers (ScyllaDB's `backlog_controller`): a background
//! group's shares follow how far behind its work is, so it speeds up when
//! it falls behind and stays out of the foreground's way when it does not.
//!
//! A controller is a piecewise-linear curve from a normalised backlog to
//! shares; outside its control points the shares stay at the end points,
//! so the output is monotonic in the backlog and within bounds.

/// A curve through `(backlog, shares)` points, backlog increasing.
#[derive(Debug, Clone)]
pub struct Controller {
    points: Vec<(f64, u32)>,
}

/// Memtable flush: backlog is dirty memory over the memtable budget.
/// ScyllaDB's points: static shares up to its soft limit, then up to the
/// top at the hard limit (the budget).
pub const FLUSH_POINTS: [(f64, u32); 3] = [(0.5, 50), (0.75, 200), (1.0, 1000)];
/// Compaction: backlog is the bytes still to compact (the strategies'
/// estimate, `shoal_storage::compaction::backlog_bytes`) over the
/// memtable budget; ScyllaDB's points, with its normalisation factor 30.
pub const COMPACTION_POINTS: [(f64, u32); 3] = [(0.0, 50), (1.5, 100), (30.0, 1000)];

impl Controller {
    /// `points` sorted by backlog, shares not decreasing (checked: a curve
    /// that went down would slow work as it falls further behind).
    pub fn new(points: &[(f64, u32)]) -> Controller {
        assert!(!points.is_empty(), "a controller needs a point");
        assert!(points.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1), "control points must increase");
        Controller { points: points.to_vec() }
    }

    /// The shares for `backlog` (a NaN backlog reads as none).
    pub fn shares(&self, backlog: f64) -> u32 {
        let backlog = if backlog.is_nan() { 0.0 } else { backlog };
        let (first, last) = (self.points[0], self.points[self.points.len() - 1]);
        if backlog <= first.0 {
            return first.1;
        }
        if backlog >= last.0 {
            return last.1;
        }
        for w in self.points.windows(2) {
            let ((x0, y0), (x1, y1)) = (w[0], w[1]);
            if backlog <= x1 {
                let fraction = (backlog - x0) / (x1 - x0);
                return y0 + ((f64::from(y1 - y0)) * fraction).round() as u32;
            }
        }
        last.1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_monotonic_in_backlog_and_within_bounds() {
        for points in [&FLUSH_POINTS[..], &COMPACTION_POINTS[..]] {
            let controller = Controller::new(points);
            let (low, high) = (points[0].1, points[points.len() - 1].1);
            let mut last = 0;
            for i in 0..4_000 {
                let shares = controller.shares(f64::from(i) * 0.01);
                assert!(shares >= last, "shares fell at backlog {}", f64::from(i) * 0.01);
                assert!((low..=high).contains(&shares));
                last = shares;
            }
            assert_eq!(controller.shares(-1.0), low);
            assert_eq!(controller.shares(f64::NAN), low);
            assert_eq!(controller.shares(1e12), high);
        }
    }

    #[test]
    fn shares_interpolate_between_points() {
        let controller = Controller::new(&COMPACTION_POINTS);
        assert_eq!(controller.shares(0.0), 50);
        assert_eq!(controller.shares(0.75), 75);
        assert_eq!(controller.shares(1.5), 100);
        assert_eq!(controller.shares(15.75), 550);
        let flush = Controller::new(&FLUSH_POINTS);
        assert_eq!(flush.shares(0.2), 50);
        assert_eq!(flush.shares(0.875), 600);
    }

    #[test]
    #[should_panic(expected = "control points must increase")]
    fn a_falling_curve_is_refused() {
        Controller::new(&[(0.0, 100), (1.0, 50)]);
    }
}

//! The health page: the hour's calls, latency percentiles and denials as
//! small charts (SVG drawn here, from numbers only), and the stores' state.

use std::fmt::Write as _;

use crate::series::{MINUTES, Minute};

const WIDTH: f64 = 300.0;
const HEIGHT: f64 = 80.0;

/// The three charts and their headline figures.
pub(crate) struct Charts {
    pub calls: u64,
    pub denials: u64,
    pub latency: String,
    pub calls_chart: String,
    pub latency_chart: String,
    pub denials_chart: String,
}

/// Charts of `hour` (oldest minute first).
pub(crate) fn charts(hour: &[Minute]) -> Charts {
    let calls: Vec<f64> = hour.iter().map(|m| m.calls as f64).collect();
    let denials: Vec<f64> = hour.iter().map(|m| m.denials as f64).collect();
    let quantile = |q: f64| -> Vec<f64> {
        hour.iter()
            .map(|m| m.percentile(q).map_or(0.0, |us| us as f64))
            .collect()
    };
    let (p50, p95, p99) = (quantile(0.5), quantile(0.95), quantile(0.99));
    let last = hour.iter().rev().find(|m| m.calls > 0);
    let latency = match last {
        Some(m) => [0.5, 0.95, 0.99]
            .map(|q| crate::calls::micros(m.percentile(q).unwrap_or(0)))
            .join(" / "),
        None => "no calls".into(),
    };
    Charts {
        calls: hour.iter().map(|m| m.calls).sum(),
        denials: hour.iter().map(|m| m.denials).sum(),
        latency,
        calls_chart: bars(&calls, "calls", "#3572a5"),
        denials_chart: bars(&denials, "denials", "#b5442c"),
        latency_chart: lines(&[(&p50, "#3572a5"), (&p95, "#c98a1b"), (&p99, "#b5442c")]),
    }
}

/// Bars, one a minute.
fn bars(values: &[f64], name: &str, colour: &str) -> String {
    let top = values.iter().copied().fold(1.0, f64::max);
    let step = WIDTH / MINUTES as f64;
    let mut svg = open(name, top);
    for (i, value) in values.iter().enumerate() {
        let height = value / top * (HEIGHT - 2.0);
        let _ = write!(
            svg,
            r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{height:.1}" fill="{colour}"/>"#,
            i as f64 * step,
            HEIGHT - height,
            (step - 1.0).max(1.0),
        );
    }
    svg + "</svg>"
}

/// Lines, one a series, on one scale.
fn lines(series: &[(&Vec<f64>, &str)]) -> String {
    let top = series
        .iter()
        .flat_map(|(values, _)| values.iter().copied())
        .fold(1.0, f64::max);
    let step = WIDTH / MINUTES as f64;
    let mut svg = open("latency", top);
    for (values, colour) in series {
        let points: Vec<String> = values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                format!(
                    "{:.1},{:.1}",
                    i as f64 * step + step / 2.0,
                    HEIGHT - v / top * (HEIGHT - 2.0)
                )
            })
            .collect();
        let _ = write!(
            svg,
            r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="1.5"/>"#,
            points.join(" ")
        );
    }
    svg + "</svg>"
}

fn open(name: &str, top: f64) -> String {
    format!(
        r##"<svg class="chart" id="chart-{name}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{name} per minute, highest {top}" xmlns="http://www.w3.org/2000/svg"><line x1="0" y1="{HEIGHT}" x2="{WIDTH}" y2="{HEIGHT}" stroke="#999" stroke-width="1"/>"##
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::series::Series;
    use std::time::SystemTime;

    #[test]
    fn charts_draw_every_minute_and_sum_the_hour() {
        let mut series = Series::default();
        let now = SystemTime::now();
        for _ in 0..3 {
            series.add(None, 40, 0, now);
        }
        series.add(Some(wasm_agent_sandbox::ErrorKind::Denied), 10, 0, now);
        let charts = charts(&series.last_hour(now));
        assert_eq!((charts.calls, charts.denials), (4, 1));
        assert_eq!(charts.calls_chart.matches("<rect").count(), MINUTES);
        assert_eq!(charts.latency_chart.matches("<polyline").count(), 3);
        assert_eq!(charts.latency, "45 µs / 45 µs / 45 µs");
    }
}

//! The two Open-Meteo endpoints the tool uses: the URLs it requests and the
//! parts of the answers it reads. Pure functions, so they are unit-tested
//! with canned JSON.

use serde::{Deserialize, Serialize};
use wasm_agent_guest::http::encode_component;

/// Answer of `GET {geocoding}/v1/search`.
#[derive(Debug, Deserialize)]
pub struct Geocoding {
    /// Absent, not empty, when nothing matched.
    #[serde(default)]
    pub results: Vec<Place>,
}

/// One match of the geocoding search.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct Place {
    pub name: String,
    /// Missing for some places (e.g. in international waters).
    #[serde(default)]
    pub country: Option<String>,
    pub latitude: f64,
    pub longitude: f64,
}

impl Place {
    /// `Paris, France`, or just `Paris` without a country.
    pub fn label(&self) -> String {
        match &self.country {
            Some(country) if !country.is_empty() => format!("{}, {country}", self.name),
            _ => self.name.clone(),
        }
    }
}

/// Answer of `GET {forecast}/v1/forecast?...&current=...`.
#[derive(Debug, Deserialize)]
pub struct Forecast {
    pub current: CurrentValues,
    #[serde(default)]
    pub current_units: CurrentUnits,
}

/// The `current` object: the values asked for.
#[derive(Debug, Deserialize)]
pub struct CurrentValues {
    /// Local ISO 8601 time of the values.
    #[serde(default)]
    pub time: Option<String>,
    pub temperature_2m: f64,
    pub wind_speed_10m: f64,
    /// A WMO weather interpretation code; some servers send it as a float.
    pub weather_code: f64,
}

/// The `current_units` object; the API's defaults when absent.
#[derive(Debug, Deserialize)]
#[serde(default)]
pub struct CurrentUnits {
    pub temperature_2m: String,
    pub wind_speed_10m: String,
}

impl Default for CurrentUnits {
    fn default() -> Self {
        Self {
            temperature_2m: "°C".into(),
            wind_speed_10m: "km/h".into(),
        }
    }
}

/// The search for `city`, best match only.
pub fn geocoding_url(base: &str, city: &str) -> String {
    format!(
        "{}/v1/search?name={}&count=1",
        base.trim_end_matches('/'),
        encode_component(city)
    )
}

/// The current conditions at a place.
pub fn forecast_url(base: &str, place: &Place) -> String {
    format!(
        "{}/v1/forecast?latitude={}&longitude={}&current=temperature_2m,wind_speed_10m,weather_code",
        base.trim_end_matches('/'),
        place.latitude,
        place.longitude
    )
}

/// What a WMO weather interpretation code (as used by Open-Meteo) means.
pub fn conditions(code: f64) -> String {
    let words = match code.round() as i64 {
        0 => "clear sky",
        1 => "mainly clear",
        2 => "partly cloudy",
        3 => "overcast",
        45 => "fog",
        48 => "depositing rime fog",
        51 => "light drizzle",
        53 => "moderate drizzle",
        55 => "dense drizzle",
        56 => "light freezing drizzle",
        57 => "dense freezing drizzle",
        61 => "slight rain",
        63 => "moderate rain",
        65 => "heavy rain",
        66 => "light freezing rain",
        67 => "heavy freezing rain",
        71 => "slight snowfall",
        73 => "moderate snowfall",
        75 => "heavy snowfall",
        77 => "snow grains",
        80 => "slight rain showers",
        81 => "moderate rain showers",
        82 => "violent rain showers",
        85 => "slight snow showers",
        86 => "heavy snow showers",
        95 => "thunderstorm",
        96 => "thunderstorm with slight hail",
        99 => "thunderstorm with heavy hail",
        other => return format!("weather code {other}"),
    };
    words.to_owned()
}

/// The one paragraph the model reads.
pub fn summary(place: &Place, forecast: &Forecast) -> String {
    let current = &forecast.current;
    let units = &forecast.current_units;
    format!(
        "Current weather in {}: {:.1} {}, wind {:.1} {}, {}.",
        place.label(),
        current.temperature_2m,
        units.temperature_2m,
        current.wind_speed_10m,
        units.wind_speed_10m,
        conditions(current.weather_code)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARIS: &str = r#"{"results":[{"id":2988507,"name":"Paris","latitude":48.85341,
        "longitude":2.3488,"elevation":42.0,"feature_code":"PPLC","country_code":"FR",
        "timezone":"Europe/Paris","population":2138551,"country":"France","admin1":"Île-de-France"}],
        "generationtime_ms":0.5}"#;

    const CURRENT: &str = r#"{"latitude":48.86,"longitude":2.3399997,"generationtime_ms":0.04,
        "utc_offset_seconds":0,"timezone":"GMT","timezone_abbreviation":"GMT","elevation":43.0,
        "current_units":{"time":"iso8601","interval":"seconds","temperature_2m":"°C",
        "wind_speed_10m":"km/h","weather_code":"wmo code"},
        "current":{"time":"2025-11-30T12:00","interval":900,"temperature_2m":12.3,
        "wind_speed_10m":9,"weather_code":2}}"#;

    fn paris() -> Place {
        let geocoding: Geocoding = serde_json::from_str(PARIS).unwrap();
        geocoding.results.into_iter().next().unwrap()
    }

    #[test]
    fn reads_the_best_match() {
        let place = paris();
        assert_eq!(place.label(), "Paris, France");
        assert_eq!(place.latitude, 48.85341);
        let nothing: Geocoding = serde_json::from_str(r#"{"generationtime_ms":0.3}"#).unwrap();
        assert!(nothing.results.is_empty());
        let stateless: Geocoding = serde_json::from_str(
            r#"{"results":[{"name":"Atlantis","latitude":0,"longitude":-30}]}"#,
        )
        .unwrap();
        assert_eq!(stateless.results[0].label(), "Atlantis");
    }

    #[test]
    fn builds_the_request_urls() {
        assert_eq!(
            geocoding_url("https://geo.example/", "São Paulo&x=1"),
            "https://geo.example/v1/search?name=S%C3%A3o%20Paulo%26x%3D1&count=1"
        );
        assert_eq!(
            forecast_url("http://127.0.0.1:8080", &paris()),
            "http://127.0.0.1:8080/v1/forecast?latitude=48.85341&longitude=2.3488\
             &current=temperature_2m,wind_speed_10m,weather_code"
        );
    }

    #[test]
    fn summarises_the_current_weather() {
        let forecast: Forecast = serde_json::from_str(CURRENT).unwrap();
        assert_eq!(
            summary(&paris(), &forecast),
            "Current weather in Paris, France: 12.3 °C, wind 9.0 km/h, partly cloudy."
        );
        let fahrenheit: Forecast = serde_json::from_str(
            r#"{"current_units":{"temperature_2m":"°F","wind_speed_10m":"mp/h"},
                "current":{"temperature_2m":-3.04,"wind_speed_10m":20.55,"weather_code":75.0}}"#,
        )
        .unwrap();
        assert_eq!(
            summary(&paris(), &fahrenheit),
            "Current weather in Paris, France: -3.0 °F, wind 20.6 mp/h, heavy snowfall."
        );
    }

    #[test]
    fn units_default_and_unknown_codes_are_named() {
        let bare: Forecast = serde_json::from_str(
            r#"{"current":{"temperature_2m":1,"wind_speed_10m":2,"weather_code":42}}"#,
        )
        .unwrap();
        assert_eq!(bare.current_units.temperature_2m, "°C");
        assert_eq!(conditions(bare.current.weather_code), "weather code 42");
        assert!(serde_json::from_str::<Forecast>(r#"{"current":{}}"#).is_err());
    }
}

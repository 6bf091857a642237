//! Current weather for a city from an Open-Meteo-compatible API.
//!
//! The operator may point the tool at another server through two
//! dependencies: `geocoding_url` (default `https://geocoding-api.open-meteo.com`)
//! and `forecast_url` (default `https://api.open-meteo.com`). The host's
//! network policy must allow both.

mod open_meteo;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use wasm_agent_guest::{Context, Output, Tool, ToolError, host, http};

use open_meteo::{Forecast, Geocoding, Place};

const DEFAULT_GEOCODING_URL: &str = "https://geocoding-api.open-meteo.com";
const DEFAULT_FORECAST_URL: &str = "https://api.open-meteo.com";

/// A place to report on.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WeatherArgs {
    /// The city's name, e.g. "Paris" or "San Francisco".
    city: String,
}

/// The best match for `city` in a geocoding answer.
fn best_match(geocoding: Geocoding, city: &str) -> Result<Place, ToolError> {
    geocoding
        .results
        .into_iter()
        .next()
        .ok_or_else(|| ToolError::failed(format!("no city named {city}")))
}

/// The text and the JSON artifact for `place`.
fn report(place: &Place, forecast: &Forecast) -> Result<Output, ToolError> {
    let current = &forecast.current;
    let units = &forecast.current_units;
    Output::text(open_meteo::summary(place, forecast)).with_json(
        "weather",
        &json!({
            "city": place.name,
            "country": place.country,
            "latitude": place.latitude,
            "longitude": place.longitude,
            "time": current.time,
            "temperature": current.temperature_2m,
            "temperature_unit": units.temperature_2m,
            "wind_speed": current.wind_speed_10m,
            "wind_speed_unit": units.wind_speed_10m,
            "weather_code": current.weather_code.round() as i64,
            "conditions": open_meteo::conditions(current.weather_code),
        }),
    )
}

fn current_weather(args: WeatherArgs, _: &Context) -> Result<Output, ToolError> {
    let city = args.city.trim();
    if city.is_empty() {
        return Err(ToolError::invalid_arguments("city must not be empty"));
    }
    let geocoding_base =
        host::dependency("geocoding_url").unwrap_or_else(|| DEFAULT_GEOCODING_URL.into());
    let forecast_base =
        host::dependency("forecast_url").unwrap_or_else(|| DEFAULT_FORECAST_URL.into());

    let geocoding = http::get(&open_meteo::geocoding_url(&geocoding_base, city))?
        .error_for_status()?
        .json::<Geocoding>()?;
    let place = best_match(geocoding, city)?;
    let forecast = http::get(&open_meteo::forecast_url(&forecast_base, &place))?
        .error_for_status()?
        .json::<Forecast>()?;
    report(&place, &forecast)
}

wasm_agent_guest::export_tools![
    Tool::new(
        "current_weather",
        "Current temperature, wind speed and conditions (clear, rain, snow, ...) in a city, \
         by name.",
        current_weather
    )
    .read_only()
    .open_world(),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_city_that_is_not_found_says_so() {
        let nothing: Geocoding = serde_json::from_str(r#"{"generationtime_ms":0.2}"#).unwrap();
        assert_eq!(
            best_match(nothing, "Atlantis"),
            Err(ToolError::failed("no city named Atlantis"))
        );
    }

    #[test]
    fn the_artifact_carries_the_numbers() {
        let place = Place {
            name: "Oslo".into(),
            country: Some("Norway".into()),
            latitude: 59.91,
            longitude: 10.75,
        };
        let forecast: Forecast = serde_json::from_str(
            r#"{"current":{"time":"2025-01-01T00:00","temperature_2m":-4.5,
                "wind_speed_10m":3.2,"weather_code":71}}"#,
        )
        .unwrap();
        let output = report(&place, &forecast).unwrap();
        assert_eq!(
            output.content(),
            "Current weather in Oslo, Norway: -4.5 °C, wind 3.2 km/h, slight snowfall."
        );
        let artifact = &output.artifacts()[0];
        assert_eq!(artifact.kind, "weather");
        let data: serde_json::Value = serde_json::from_slice(&artifact.data).unwrap();
        assert_eq!(data["temperature"], -4.5);
        assert_eq!(data["conditions"], "slight snowfall");
        assert_eq!(data["weather_code"], 71);
        assert_eq!(data["time"], "2025-01-01T00:00");
    }

    #[test]
    fn an_empty_city_is_an_argument_error() {
        let args = WeatherArgs { city: "  ".into() };
        assert!(matches!(
            current_weather(args, &Context::default()),
            Err(ToolError::InvalidArguments(_))
        ));
    }
}

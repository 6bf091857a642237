//! `calculate`: arithmetic for a model that should not do it in its head.
//!
//! Expressions are parsed by a small recursive-descent parser (no `eval`),
//! and the last result is kept in session state as `ans`.

mod parser;

use schemars::JsonSchema;
use serde::Deserialize;
use wasm_agent_guest::{Context, Output, Tool, ToolError, host};

/// Session-state key of the previous result.
const ANS_KEY: &str = "ans";

/// An arithmetic expression to evaluate.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CalculateArgs {
    /// The expression, e.g. `2 * (3 + 4.5) ^ 2 - sqrt(16) / ans`. Operators
    /// are `+ - * / % ^` and parentheses; constants are pi, e, tau, and ans
    /// (the previous result in this session); functions are sqrt, cbrt, abs,
    /// sin, cos, tan, asin, acos, atan, atan2, exp, ln, log10, log2, pow,
    /// round, floor, ceil, trunc, min and max. Angles are in radians.
    expression: String,
}

fn calculate(args: CalculateArgs, _: &Context) -> Result<Output, ToolError> {
    let ans = host::state::get::<f64>(ANS_KEY)?;
    let value = parser::evaluate(&args.expression, ans).map_err(|error| {
        ToolError::failed(format!("cannot evaluate {:?}: {error}", args.expression))
    })?;
    host::state::set(ANS_KEY, &value)?;
    Ok(Output::text(parser::format_number(value)))
}

wasm_agent_guest::export_tools![
    Tool::new(
        "calculate",
        "Evaluate an arithmetic expression exactly as written and return the number. \
     Use it for any arithmetic instead of computing in your head. The result is \
     remembered as `ans` for the next expression in this session.",
        calculate
    )
    .idempotent()
];

#[cfg(test)]
mod tests {
    use super::parser::{evaluate, format_number};

    fn eval(expression: &str) -> f64 {
        evaluate(expression, None).unwrap_or_else(|error| panic!("{expression}: {error}"))
    }

    fn error(expression: &str) -> String {
        match evaluate(expression, None) {
            Ok(value) => panic!("{expression} gave {value}, expected an error"),
            Err(error) => error.to_string(),
        }
    }

    #[test]
    fn precedence_and_associativity() {
        assert_eq!(eval("1 + 2 * 3"), 7.0);
        assert_eq!(eval("(1 + 2) * 3"), 9.0);
        assert_eq!(eval("10 - 4 - 3"), 3.0);
        assert_eq!(eval("2 ^ 3 ^ 2"), 512.0);
        assert_eq!(eval("-2 ^ 2"), -4.0);
        assert_eq!(eval("2 ^ -1"), 0.5);
        assert_eq!(eval("--3"), 3.0);
        assert_eq!(eval("+4 * -2"), -8.0);
        assert_eq!(eval("7 % 4 * 2"), 6.0);
        assert_eq!(eval("12 / 4 / 3"), 1.0);
        assert_eq!(eval("3 × 4 ÷ 2"), 6.0);
    }

    #[test]
    fn numbers() {
        assert_eq!(eval("1.5 + .5 + 2."), 4.0);
        assert_eq!(eval("1e3 + 2.5E-1"), 1000.25);
        // `2e` is the number 2 then the name e; there is no implicit
        // multiplication.
        assert_eq!(error("2e"), "unexpected 'e' at position 2");
        assert_eq!(eval("2 * e"), 2.0 * std::f64::consts::E);
    }

    #[test]
    fn constants_and_functions() {
        assert_eq!(eval("pi"), std::f64::consts::PI);
        assert_eq!(eval("E"), std::f64::consts::E);
        assert_eq!(eval("sqrt(16) + abs(-2)"), 6.0);
        assert_eq!(eval("min(3, 1, 2) + max(4, 9)"), 10.0);
        assert_eq!(
            eval("round(2.5) + floor(-1.5) + ceil(1.2)"),
            3.0 - 2.0 + 2.0
        );
        assert_eq!(eval("log10(1000) + ln(e) + log2(8)"), 7.0);
        assert!((eval("sin(pi / 2) + cos(0)") - 2.0).abs() < 1e-12);
        assert_eq!(eval("pow(2, 10)"), 1024.0);
        assert_eq!(eval("sqrt((3)^2 + 4^2)"), 5.0);
    }

    #[test]
    fn ans_is_the_previous_result() {
        assert_eq!(evaluate("ans * 2", Some(21.0)), Ok(42.0));
        assert!(error("ans + 1").starts_with("'ans' at position 1 has no value yet"));
    }

    #[test]
    fn syntax_errors_name_the_position() {
        assert_eq!(error("(1 + 2))"), "unexpected ')' at position 8");
        assert_eq!(error("1 + * 2"), "unexpected '*' at position 5");
        assert_eq!(error("1 +"), "unexpected end of expression");
        assert_eq!(error("(1 + 2"), "missing ')' for the '(' at position 1");
        assert_eq!(error("2 $ 3"), "unexpected character '$' at position 3");
        assert_eq!(error("1.2.3"), "unexpected number at position 4");
        assert_eq!(error("3 4"), "unexpected number at position 3");
        assert_eq!(error("."), "malformed number '.' at position 1");
        assert_eq!(error(""), "the expression is empty");
        assert_eq!(error("   "), "the expression is empty");
        assert_eq!(error("max()"), "unexpected ')' at position 5");
        assert_eq!(
            error("sqrt(1, 2)"),
            "function 'sqrt' at position 1 takes 1 argument, got 2"
        );
        assert!(error("foo + 1").starts_with("unknown name 'foo' at position 1; constants are pi"));
        assert!(error("foo(1)").starts_with("unknown function 'foo' at position 1"));
        assert!(error("sqrt + 1").starts_with("function 'sqrt' at position 1 needs arguments"));
    }

    #[test]
    fn arithmetic_errors() {
        assert_eq!(error("1 / 0"), "division by zero at position 3");
        assert_eq!(error("5 % (2 - 2)"), "modulo by zero at position 3");
        assert_eq!(
            error("sqrt(-1)"),
            "sqrt() at position 1 gives an undefined value"
        );
        assert_eq!(
            error("10 ^ 400"),
            "'^' at position 4 gives an infinite value"
        );
        assert_eq!(
            error("1e308 * 10"),
            "'*' at position 7 gives an infinite value"
        );
        assert_eq!(error("ln(0)"), "ln() at position 1 gives an infinite value");
    }

    #[test]
    fn deep_nesting_is_refused_not_overflowed() {
        let deep = format!("{}1{}", "(".repeat(10_000), ")".repeat(10_000));
        assert!(error(&deep).starts_with("the expression nests deeper than 200 levels"));
        let minus = format!("{}1", "-".repeat(10_000));
        assert!(error(&minus).starts_with("the expression nests deeper than 200 levels"));
        let nested = format!("{}1{}", "(".repeat(50), ")".repeat(50));
        assert_eq!(eval(&nested), 1.0);
    }

    #[test]
    fn formatting() {
        assert_eq!(format_number(eval("0.1 + 0.2")), "0.3");
        assert_eq!(format_number(42.0), "42");
        assert_eq!(format_number(-0.0), "0");
        assert_eq!(format_number(2.5), "2.5");
        assert_eq!(format_number(1e20), "1e20");
        assert_eq!(format_number(1.5e-9), "1.5e-9");
        assert_eq!(format_number(1.0 / 3.0), "0.333333333333333");
    }
}

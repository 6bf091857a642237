//! Property tests of the truncation of tool results.

use proptest::prelude::*;

use crate::limit::truncate;

proptest! {
    #[test]
    fn truncation_never_exceeds_its_budget(text in "\\PC{0,300}", max in 0usize..200) {
        let cut = truncate(&text, max);
        if text.chars().count() <= max {
            prop_assert_eq!(cut, text);
        } else {
            prop_assert!(cut.chars().count() <= max, "{} chars for a budget of {max}", cut.chars().count());
        }
    }

    #[test]
    fn truncated_json_arrays_stay_json(items in proptest::collection::vec(any::<i64>(), 0..200), max in 64usize..400) {
        let text = serde_json::to_string(&items).unwrap();
        let cut = truncate(&text, max);
        prop_assert!(cut.chars().count() <= max);
        if text.chars().count() > max {
            prop_assert!(cut.len() < text.len());
        }
    }
}

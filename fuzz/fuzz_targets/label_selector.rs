//! Label selector text (`?labelSelector=`): no input may panic, and a selector that parses
//! prints to text that parses back to the same selector.
#![no_main]
use keelson_apimachinery::LabelSelector;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(sel) = LabelSelector::parse(text) {
        let printed = sel.to_string();
        let again = LabelSelector::parse(&printed).unwrap_or_else(|e| {
            panic!("{text:?} printed as {printed:?}, which does not parse: {e}")
        });
        assert_eq!(again, sel, "{text:?} -> {printed:?}");
    }
});

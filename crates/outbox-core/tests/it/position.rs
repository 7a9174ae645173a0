//! Property tests of `Position`: both text forms round-trip, order is numeric, overflow is refused.

use outbox_core::Position;
use proptest::prelude::*;

proptest! {
    #[test]
    fn both_text_forms_round_trip(txid in any::<u64>(), seq in any::<u64>()) {
        let position = Position::new(txid, seq);
        prop_assert_eq!(Position::parse(&position.dotted()), Ok(position));
        prop_assert_eq!(Position::parse(&position.colon()), Ok(position));
        let json = serde_json::to_string(&position).unwrap();
        prop_assert_eq!(serde_json::from_str::<Position>(&json).unwrap(), position);
    }

    #[test]
    fn leading_zeros_up_to_twenty_digits_parse(txid in 0u64..1_000_000, seq in 0u64..1_000_000) {
        let text = format!("{txid:020}:{seq:020}");
        prop_assert_eq!(Position::parse(&text), Ok(Position::new(txid, seq)));
        let too_long = format!("{txid:021}.{seq}");
        prop_assert!(Position::parse(&too_long).is_err());
    }

    #[test]
    fn order_is_txid_then_seq_as_numbers(a in any::<(u64, u64)>(), b in any::<(u64, u64)>()) {
        let (pa, pb) = (Position::new(a.0, a.1), Position::new(b.0, b.1));
        prop_assert_eq!(pa.cmp(&pb), a.cmp(&b));
    }

    #[test]
    fn values_past_64_bits_are_refused(excess in 1u128..1_000_000, small in any::<u64>()) {
        let big = u128::from(u64::MAX) + excess;
        let (first, second) = (format!("{big}.{small}"), format!("{small}:{big}"));
        prop_assert!(Position::parse(&first).is_err());
        prop_assert!(Position::parse(&second).is_err());
    }

    #[test]
    fn anything_but_two_digit_groups_is_refused(text in "[0-9.:a -]{0,24}") {
        let valid = text.split_once(['.', ':']).is_some_and(|(t, s)| {
            let group = |g: &str| (1..=20).contains(&g.len()) && g.bytes().all(|b| b.is_ascii_digit()) && g.parse::<u64>().is_ok();
            group(t) && group(s)
        });
        prop_assert_eq!(Position::parse(&text).is_ok(), valid, "{:?}", text);
    }
}

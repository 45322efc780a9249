use super::*;

#[test]
fn delays_double_from_the_minimum_up_to_the_ceiling_and_reset() {
    let mut b = WatchBackoff::default();
    let delays: Vec<u128> = b.by_ref().take(7).map(|d| d.as_millis()).collect();
    assert_eq!(delays, [250, 500, 1000, 2000, 4000, 5000, 5000]);
    b.reset();
    assert_eq!(b.next(), Some(MIN_DELAY));
}

use super::*;

#[test]
fn a_recycled_delta_list_is_emptied_and_keeps_its_allocation() {
    let text = String::from("borrowed");
    let mut deltas: Vec<Delta<'_>> = Vec::with_capacity(8);
    deltas.push(Delta::Text {
        choice: 0,
        channel: crate::delta::Channel::Content,
        text: std::borrow::Cow::Borrowed(&text),
    });
    let ptr = deltas.as_ptr() as usize;
    let kept = recycle(deltas);
    assert!(kept.is_empty());
    assert_eq!(kept.as_ptr() as usize, ptr);
    assert_eq!(kept.capacity(), 8);
}

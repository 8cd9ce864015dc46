//! Ingest bodies as JSON: an event's fields each parsed once into a
//! [`Field`] (so a bad field fails its event alone, with a precise code),
//! and a batch body read in one pass when it is the usual one.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::ApiError;
use super::extract::{object, object_str};

/// One event as sent. Each field is parsed once into a [`Field`], whatever
/// its JSON type, so that a bad field fails that event alone, with a
/// precise error code.
#[derive(Deserialize)]
#[cfg_attr(test, derive(Debug, PartialEq))]
#[serde(rename_all = "camelCase")]
pub(super) struct RawEvent<'a> {
    #[serde(rename = "type", borrow)]
    pub(super) kind: Option<Field<'a>>,
    #[serde(borrow)]
    pub(super) article_id: Option<Field<'a>>,
    #[serde(borrow)]
    pub(super) visitor_id: Option<Field<'a>>,
    #[serde(borrow)]
    pub(super) user_id: Option<Field<'a>>,
    #[serde(borrow)]
    pub(super) ts: Option<Field<'a>>,
    #[serde(borrow)]
    pub(super) event_id: Option<Field<'a>>,
    #[serde(borrow)]
    pub(super) seconds: Option<Field<'a>>,
    #[serde(borrow)]
    pub(super) ip: Option<Field<'a>>,
    #[serde(borrow)]
    pub(super) user_agent: Option<Field<'a>>,
    /// Widget events (`impression`, `click`): the list and the position.
    #[serde(borrow)]
    pub(super) list: Option<Field<'a>>,
    #[serde(borrow)]
    pub(super) position: Option<Field<'a>>,
}

#[derive(Deserialize)]
struct RawBatch<'a> {
    #[serde(borrow)]
    events: Vec<&'a RawValue>,
}
/// A field's value as sent (`null` is an absent field): a string, borrowed
/// from the body unless it had escapes; a number; or some other JSON value,
/// skipped, which every field refuses.
#[cfg_attr(test, derive(Debug, PartialEq))]
pub(super) enum Field<'a> {
    Str(Cow<'a, str>),
    Num(serde_json::Number),
    Other,
}

impl Field<'_> {
    pub(super) fn as_str(&self) -> Option<&str> {
        match self {
            Field::Str(s) => Some(s),
            _ => None,
        }
    }

    /// A JSON number as [`serde_json::Value`], for [`crate::model::integral`].
    pub(super) fn number(&self) -> Option<serde_json::Value> {
        match self {
            Field::Num(n) => Some(serde_json::Value::Number(n.clone())),
            _ => None,
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Field<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(FieldVisitor(std::marker::PhantomData))
    }
}

struct FieldVisitor<'a>(std::marker::PhantomData<&'a ()>);

impl<'de: 'a, 'a> serde::de::Visitor<'de> for FieldVisitor<'a> {
    type Value = Field<'a>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Field<'a>, E> {
        Ok(Field::Str(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Field<'a>, E> {
        Ok(Field::Str(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E>(self, v: String) -> Result<Field<'a>, E> {
        Ok(Field::Str(Cow::Owned(v)))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Field<'a>, E> {
        Ok(Field::Num(v.into()))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Field<'a>, E> {
        Ok(Field::Num(v.into()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Field<'a>, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Field::Other, Field::Num))
    }
    fn visit_bool<E>(self, _: bool) -> Result<Field<'a>, E> {
        Ok(Field::Other)
    }
    fn visit_unit<E>(self) -> Result<Field<'a>, E> {
        Ok(Field::Other)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Field<'a>, A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(Field::Other)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Field<'a>, A::Error> {
        while map
            .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
            .is_some()
        {}
        Ok(Field::Other)
    }
}

/// One event of a body already parsed as JSON, as a [`RawEvent`].
pub(super) fn raw_event(raw: &RawValue) -> Result<RawEvent<'_>, ApiError> {
    object_str(raw.get()).map_err(|e| {
        ApiError::bad(
            "invalid_event",
            format!("an event must be a JSON object: {e}"),
        )
    })
}

/// A single event's body in one pass, when it is a JSON object that reads
/// as an event: the usual `POST /api/views` body, parsed once rather than
/// checked as JSON and then read as an event. Any other body is `None`,
/// and the caller reads it the slow way ([`raw_event`] after a parse as
/// JSON), whose errors say what is wrong.
pub(super) fn one_pass_event(body: &[u8]) -> Option<RawEvent<'_>> {
    object_str(std::str::from_utf8(body).ok()?).ok()
}

/// A batch body in one pass, when it is an object whose `events` are at
/// most `max` objects none of which repeats a field: the usual batch. Any
/// other body is `None`, and the caller parses it in two passes (the body,
/// then each event), which say precisely what is wrong where.
pub(super) fn one_pass_batch(body: &[u8], max: usize) -> Option<Vec<RawEvent<'_>>> {
    // UTF-8 checked once for the whole body, not string by string.
    let body = std::str::from_utf8(body).ok()?;
    let mut de = serde_json::Deserializer::from_str(body);
    let events = serde::de::DeserializeSeed::deserialize(OnePassBatch { max }, &mut de).ok()?;
    de.end().ok()?;
    Some(events)
}

/// A batch body the slow way: the body, then each event, each failing on
/// its own with a precise error.
pub(super) fn two_pass_batch(
    body: &[u8],
    max: usize,
) -> Result<Vec<Result<RawEvent<'_>, ApiError>>, ApiError> {
    let batch: RawBatch<'_> = object(body).map_err(|e| {
        ApiError::bad(
            "invalid_json",
            format!("body must be a JSON object {{\"events\": [...]}}: {e}"),
        )
    })?;
    if batch.events.len() > max {
        return Err(ApiError::bad(
            "batch_too_large",
            format!(
                "a batch holds at most {max} events, got {}",
                batch.events.len()
            ),
        ));
    }
    Ok(batch.events.into_iter().map(raw_event).collect())
}

struct OnePassBatch {
    max: usize,
}

impl<'de> serde::de::DeserializeSeed<'de> for OnePassBatch {
    type Value = Vec<RawEvent<'de>>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> serde::de::Visitor<'de> for OnePassBatch {
    type Value = Vec<RawEvent<'de>>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a batch object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        use serde::de::Error;
        let mut events = None;
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            if key != "events" {
                map.next_value::<serde::de::IgnoredAny>()?;
            } else if events.is_some() {
                return Err(A::Error::duplicate_field("events"));
            } else {
                events = Some(map.next_value_seed(OnePassEvents { max: self.max })?);
            }
        }
        events.ok_or_else(|| A::Error::missing_field("events"))
    }
}

struct OnePassEvents {
    max: usize,
}

impl<'de> serde::de::DeserializeSeed<'de> for OnePassEvents {
    type Value = Vec<RawEvent<'de>>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> serde::de::Visitor<'de> for OnePassEvents {
    type Value = Vec<RawEvent<'de>>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an array of event objects")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut events = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(self.max));
        while let Some(EventObject(ev)) = seq.next_element()? {
            if events.len() == self.max {
                return Err(serde::de::Error::custom("too many events"));
            }
            events.push(ev);
        }
        Ok(events)
    }
}

/// A [`RawEvent`] that must be a JSON object (serde's derive would also
/// take an array of the fields' values).
struct EventObject<'a>(RawEvent<'a>);

impl<'de> Deserialize<'de> for EventObject<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(EventObjectVisitor)
    }
}

struct EventObjectVisitor;

impl<'de> serde::de::Visitor<'de> for EventObjectVisitor {
    type Value = EventObject<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an event object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        RawEvent::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(EventObject)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// JSON text for a field's value: strings with and without escapes,
    /// integers, floats, and the other kinds.
    fn value() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z0-9]{0,6}".prop_map(|s| format!("\"{s}\"")),
            "[a-z]{0,3}".prop_map(|s| format!("\"\\u0041{s}\\n\"")),
            any::<i64>().prop_map(|n| n.to_string()),
            any::<u64>().prop_map(|n| n.to_string()),
            (-1e6f64..1e6).prop_map(|f| format!("{f:e}")),
            Just("1e400".to_string()),
            Just("null".to_string()),
            Just("true".to_string()),
            Just("[1, {\"a\": [2]}]".to_string()),
            Just("{\"type\": \"view\"}".to_string()),
        ]
    }

    fn key() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("type"),
            Just("articleId"),
            Just("visitorId"),
            Just("userId"),
            Just("ts"),
            Just("eventId"),
            Just("seconds"),
            Just("ip"),
            Just("userAgent"),
            Just("list"),
            Just("position"),
            Just("other"),
        ]
        .prop_map(str::to_string)
    }

    /// An event: mostly objects (sometimes repeating a field), now and then
    /// another JSON value.
    fn event() -> impl Strategy<Value = String> {
        prop_oneof![
            8 => prop::collection::vec((key(), value()), 0..6).prop_map(|fields| {
                let fields: Vec<String> =
                    fields.iter().map(|(k, v)| format!("\"{k}\": {v}")).collect();
                format!("{{{}}}", fields.join(", "))
            }),
            1 => value(),
            1 => Just("[\"view\", \"a1\"]".to_string()),
        ]
    }

    fn body() -> impl Strategy<Value = String> {
        (prop::collection::vec(event(), 0..8), 0..4u8).prop_map(|(events, shape)| {
            let list = format!("[{}]", events.join(", "));
            match shape {
                0 => format!("{{\"events\": {list}}}"),
                1 => format!("{{\"x\": [1], \"events\": {list}, \"y\": null}}"),
                2 => format!("{{\"events\": {list}, \"events\": []}}"),
                _ => list,
            }
        })
    }

    proptest! {
        /// The one-pass parse takes only bodies the two-pass parse takes
        /// whole, and reads every event the same.
        #[test]
        fn one_pass_reads_what_two_passes_read(body in body(), max in 1usize..10) {
            let two = two_pass_batch(body.as_bytes(), max);
            match one_pass_batch(body.as_bytes(), max) {
                Some(one) => {
                    let two: Vec<RawEvent<'_>> = two
                        .expect("the two-pass parse takes the body")
                        .into_iter()
                        .collect::<Result<_, _>>()
                        .expect("and every event");
                    prop_assert_eq!(one, two);
                }
                None => {
                    // The usual batch always takes the one pass.
                    let whole = two.is_ok_and(|evs| evs.iter().all(Result::is_ok));
                    let repeats = body.matches("\"events\"").count() > 1;
                    prop_assert!(!whole || repeats, "one pass refused a plain batch: {}", body);
                }
            }
        }

        /// A single event's body: the one pass takes exactly the bodies
        /// the two passes (JSON, then the event) take, and reads the same.
        #[test]
        fn one_pass_event_reads_what_two_passes_read(body in event()) {
            let two = serde_json::from_slice::<&RawValue>(body.as_bytes())
                .ok()
                .and_then(|raw| raw_event(raw).ok());
            prop_assert_eq!(one_pass_event(body.as_bytes()), two);
        }
    }
}

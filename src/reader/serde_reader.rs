//! The request reader on serde's borrowed deserialization instead of the hand-written pull
//! reader of [`super::json`] (issue 25, deliverable 4): built only with the `serde-reader`
//! feature, to measure the two against each other on the same views.
//!
//! serde_json reads the document once into a [`Node`] with a [`Visitor`]: strings without
//! escapes borrowed from the input, strings with escapes owned (`Cow`), what no rule reads
//! (`metadata.managedFields`, the values of `metadata.annotations` and `metadata.labels` of
//! the request's objects and of a lookup answer's items) passed over as [`IgnoredAny`]
//! (checked, not built). Objects are built as a `Value` holds them (sorted, the last value of
//! a key given twice). The [`Reader`] then hands that node to the views (request.rs,
//! object.rs, lookups.rs) through the pull reader's API, moving each value out of the tree, so
//! the views and the rules are the same code on either reader.
//!
//! Unlike the hand reader, a pool list's items are built whole (their `spec` and `status`,
//! of which the views read three fields), and the request's unread fields too: the visitor
//! knows where it is only as far as the states of [`At`] say.

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::json::{Invalid, Next, Node, Read, Scalar, Str, Text};

/// Where the visitor is, as far as the skipped values depend on it.
#[derive(Clone, Copy)]
enum At {
    /// The document: a payload, a request, or a list answer.
    Root,
    /// A Kubernetes object: the request's `object`/`oldObject`, an item of a list.
    Object,
    /// An object's `metadata`.
    Metadata,
    /// `items` of a list answer.
    Items,
    /// An object whose values no rule reads (annotations, labels): keys kept, values skipped.
    Keys,
    /// Everything built.
    Any,
}

struct Seed(At);

impl<'de> DeserializeSeed<'de> for Seed {
    type Value = Node<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Node<'de>, D::Error> {
        deserializer.deserialize_any(self)
    }
}

/// An object key, borrowed unless it holds escapes.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v))
    }
}

impl<'de> Visitor<'de> for Seed {
    type Value = Node<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Node<'de>, E> {
        Ok(Node::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Node<'de>, E> {
        Ok(Node::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Node<'de>, E> {
        Ok(Node::Number(v.into()))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Node<'de>, E> {
        serde_json::Number::from_f64(v)
            .map(Node::Number)
            .ok_or_else(|| E::custom("number out of range"))
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Node<'de>, E> {
        Ok(Node::String(Str::Plain(Cow::Borrowed(v))))
    }

    fn visit_str<E>(self, v: &str) -> Result<Node<'de>, E> {
        Ok(Node::String(Str::Plain(Cow::Owned(v.to_owned()))))
    }

    fn visit_string<E>(self, v: String) -> Result<Node<'de>, E> {
        Ok(Node::String(Str::Plain(Cow::Owned(v))))
    }

    fn visit_unit<E>(self) -> Result<Node<'de>, E> {
        Ok(Node::Null)
    }

    fn visit_none<E>(self) -> Result<Node<'de>, E> {
        Ok(Node::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node<'de>, A::Error> {
        let item = match self.0 {
            At::Items => At::Object,
            _ => At::Any,
        };
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(node) = seq.next_element_seed(Seed(item))? {
            items.push(node);
        }
        Ok(Node::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node<'de>, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key_seed(Key)? {
            let below = match (self.0, &*key) {
                (At::Root, "request") => Some(At::Root),
                (At::Root, "object" | "oldObject") => Some(At::Object),
                (At::Root, "items") => Some(At::Items),
                (At::Object, "metadata") => Some(At::Metadata),
                (At::Metadata, "managedFields") | (At::Keys, _) => None,
                (At::Metadata, "annotations" | "labels") => Some(At::Keys),
                _ => Some(At::Any),
            };
            let value = match below {
                Some(at) => map.next_value_seed(Seed(at))?,
                None => {
                    map.next_value::<IgnoredAny>()?;
                    Node::Null
                }
            };
            entries.push((Str::Plain(key), value));
        }
        Ok(Node::object(entries))
    }
}

/// The pull reader's API over a node serde built: each call takes the next value out.
#[allow(dead_code)] // the whole API, as the hand reader has it
pub struct Reader<'a> {
    next: Option<Node<'a>>,
}

/// A key or string as the views take it. A string with escapes was unescaped by serde into a
/// `String` the views would borrow for the input's lifetime: it is leaked (the module runs
/// one request per instance; such keys and metadata strings are rare, and a value read as a
/// node is moved, never leaked).
fn text<'a>(s: Str<'a>) -> Text<'a> {
    match s {
        Str::Plain(Cow::Borrowed(s)) => Text::unescaped(s),
        Str::Plain(Cow::Owned(s)) => Text::unescaped(Box::leak(s.into_boxed_str())),
        Str::Json(t) => t,
    }
}

const NO_VALUE: Invalid = Invalid("expected a value");

#[allow(dead_code)]
impl<'a> Reader<'a> {
    fn take(&mut self) -> Read<Node<'a>> {
        self.next.take().ok_or(NO_VALUE)
    }

    pub fn peek(&mut self) -> Read<Next> {
        Ok(match self.next.as_ref().ok_or(NO_VALUE)? {
            Node::Object(_) => Next::Object,
            Node::Array(_) => Next::Array,
            Node::String(_) => Next::String,
            Node::Number(_) => Next::Number,
            Node::Bool(_) => Next::Bool,
            Node::Null => Next::Null,
        })
    }

    pub fn finish(&mut self) -> Read<()> {
        Ok(())
    }

    pub fn read_object(
        &mut self,
        mut field: impl FnMut(&mut Self, Text<'a>) -> Read<()>,
    ) -> Read<()> {
        let Node::Object(entries) = self.take()? else {
            return Err(Invalid("expected an object"));
        };
        for (key, value) in entries {
            self.next = Some(value);
            field(self, text(key))?;
        }
        self.next = None;
        Ok(())
    }

    pub fn read_object_or_skip(
        &mut self,
        field: impl FnMut(&mut Self, Text<'a>) -> Read<()>,
    ) -> Read<bool> {
        if self.peek()? == Next::Object {
            self.read_object(field)?;
            Ok(true)
        } else {
            self.skip()?;
            Ok(false)
        }
    }

    pub fn read_array(&mut self, mut item: impl FnMut(&mut Self) -> Read<()>) -> Read<()> {
        let Node::Array(items) = self.take()? else {
            return Err(Invalid("expected a list"));
        };
        for value in items {
            self.next = Some(value);
            item(self)?;
        }
        self.next = None;
        Ok(())
    }

    pub fn read_text(&mut self) -> Read<Text<'a>> {
        match self.take()? {
            Node::String(s) => Ok(text(s)),
            _ => Err(Invalid("expected a string")),
        }
    }

    pub fn read_bool(&mut self) -> Read<bool> {
        match self.take()? {
            Node::Bool(b) => Ok(b),
            _ => Err(Invalid("expected a boolean")),
        }
    }

    pub fn read_null(&mut self) -> Read<()> {
        match self.take()? {
            Node::Null => Ok(()),
            _ => Err(Invalid("expected null")),
        }
    }

    pub fn read_scalar(&mut self) -> Read<Scalar<'a>> {
        Ok(match self.take()? {
            Node::String(s) => Scalar::Str(text(s)),
            Node::Bool(b) => Scalar::Bool(b),
            Node::Null => Scalar::Null,
            _ => Scalar::Other,
        })
    }

    pub fn skip(&mut self) -> Read<()> {
        self.take().map(drop)
    }

    pub fn read_node(&mut self) -> Read<Node<'a>> {
        self.take()
    }

    pub fn read_list<T>(
        &mut self,
        mut item: impl FnMut(&mut Self) -> Read<T>,
    ) -> Read<Option<Vec<T>>> {
        if self.peek()? != Next::Array {
            self.skip()?;
            return Ok(None);
        }
        let mut items = Vec::new();
        self.read_array(|r| {
            items.push(item(r)?);
            Ok(())
        })?;
        Ok(Some(items))
    }
}

/// Reads a whole document with `read`: serde_json builds the node (refusing what it refuses,
/// trailing characters included), the views read it.
pub fn read_document<'a, T>(
    input: &'a [u8],
    read: impl FnOnce(&mut Reader<'a>) -> Read<T>,
) -> Read<T> {
    let mut deserializer = serde_json::Deserializer::from_slice(input);
    let node = Seed(At::Root)
        .deserialize(&mut deserializer)
        .and_then(|node| deserializer.end().map(|_| node))
        .map_err(|_| Invalid("refused by serde_json"))?;
    let mut reader = Reader { next: Some(node) };
    read(&mut reader)
}

//! The backend names a FleetPolicy may choose, taken from the policy crate's catalogue
//! ([`BackendKind::ALL`] and its capabilities), so the CRD's enums and the gate's validator
//! read one list.

use std::borrow::Cow;
use std::sync::LazyLock;

use fleetgate_policy::backends::BackendKind;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The names of the backends that can extract pages, in the catalogue's order.
static EXTRACT_NAMES: LazyLock<Vec<&'static str>> =
    LazyLock::new(|| names(|kind| kind.capabilities().extract));

/// The names of the backends that can search, in the catalogue's order.
static SEARCH_NAMES: LazyLock<Vec<&'static str>> =
    LazyLock::new(|| names(|kind| kind.capabilities().search));

fn names(can: fn(BackendKind) -> bool) -> Vec<&'static str> {
    BackendKind::ALL
        .into_iter()
        .filter(|kind| can(*kind))
        .map(BackendKind::name)
        .collect()
}

/// One string constant per name, as schemars writes a documented unit enum; the CRD generator
/// folds it into a string enum (and an optional field into `nullable`).
fn name_schema(description: &str, names: &[&'static str]) -> Schema {
    let one_of: Vec<serde_json::Value> = names
        .iter()
        .map(|name| serde_json::json!({ "type": "string", "const": name }))
        .collect();
    schemars::json_schema!({
        "description": description,
        "oneOf": one_of,
    })
}

/// A backend that can extract pages, by the gate's name for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExtractBackend(BackendKind);

/// A backend that can search, by the gate's name for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SearchBackend(BackendKind);

/// Both name types: a backend of the catalogue that has one capability.
macro_rules! backend_name {
    ($ty:ident, $names:ident, $capability:ident, $description:literal) => {
        impl $ty {
            /// `kind` as this choice, when it has the capability.
            pub fn new(kind: BackendKind) -> Option<Self> {
                kind.capabilities().$capability.then_some(Self(kind))
            }

            /// Every backend with the capability, in the catalogue's order.
            pub fn all() -> impl Iterator<Item = Self> {
                BackendKind::ALL.into_iter().filter_map(Self::new)
            }

            /// The catalogue's backend.
            pub fn kind(self) -> BackendKind {
                self.0
            }

            /// The gate's name for this backend.
            pub fn name(self) -> &'static str {
                self.0.name()
            }
        }

        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.name())
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let name = Cow::<'de, str>::deserialize(deserializer)?;
                BackendKind::from_name(&name)
                    .and_then(Self::new)
                    .ok_or_else(|| serde::de::Error::unknown_variant(&name, $names.as_slice()))
            }
        }

        impl JsonSchema for $ty {
            fn schema_name() -> Cow<'static, str> {
                stringify!($ty).into()
            }

            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                name_schema($description, &$names)
            }
        }
    };
}

backend_name!(
    ExtractBackend,
    EXTRACT_NAMES,
    extract,
    "A backend that can extract pages, by the gate's name for it."
);
backend_name!(
    SearchBackend,
    SEARCH_NAMES,
    search,
    "A backend that can search, by the gate's name for it."
);

//! The change bus's messages, and the one shape prompts, resources and templates share: what
//! each is made from, how it is checked in, which capability and list it belongs to, and what
//! listen streams are told when the set changes. Below the server, so that both the builder and
//! the runtime registration use it.

use std::sync::Arc;

pub(crate) use crate::state::fanout::Change;
use toolwire_protocol::methods::{ListPrompts, ListResourceTemplates, ListResources, Method};

use crate::error::{Error, Result};
use crate::request::cursor::ListKind;
use crate::tools::catalog::{Catalog, Entry};
use crate::tools::prompt::{Prompt, RegisteredPrompt};
use crate::tools::resource::{
    RegisteredResource, RegisteredTemplate, Resource, ResourceTemplate, UriTemplate,
};

/// Which capability registering a prompt, resource or template needs.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Offer {
    Prompts,
    Resources,
}

/// A prompt, resource or template as registered: what it is made from, how it is checked on the
/// way in, and what its registration and removal tell listen streams. One shape for the three,
/// so that adding and removing them is written once.
pub(crate) trait Offered: Entry + Sized {
    /// What the server author registers.
    type Value;
    /// Its kind, as errors name it.
    const KIND: &'static str;
    /// The capability it needs.
    const OFFER: Offer;
    /// What a [`ToolVisibility`](crate::ToolVisibility) sees it as.
    const VISIBLE_AS: crate::tools::visibility::OfferKind;
    /// What listen streams are told when the set changes.
    const CHANGE: Change;
    /// Which list it is on, for cursors and the result's member.
    const LIST: ListKind;
    /// The method that lists it.
    const LIST_METHOD: &'static str;

    /// Checks and prepares one value for its catalog.
    fn register(value: Self::Value) -> Result<Self>;
}

impl Offered for RegisteredPrompt {
    type Value = Prompt;
    const KIND: &'static str = "prompt";
    const OFFER: Offer = Offer::Prompts;
    const VISIBLE_AS: crate::tools::visibility::OfferKind =
        crate::tools::visibility::OfferKind::Prompt;
    const CHANGE: Change = Change::Prompts;
    const LIST: ListKind = ListKind::Prompts;
    const LIST_METHOD: &'static str = ListPrompts::METHOD;

    fn register(prompt: Prompt) -> Result<Self> {
        Ok(RegisteredPrompt::new(prompt).map_err(std::io::Error::other)?)
    }
}

impl Offered for RegisteredResource {
    type Value = Resource;
    const KIND: &'static str = "resource";
    const OFFER: Offer = Offer::Resources;
    const VISIBLE_AS: crate::tools::visibility::OfferKind =
        crate::tools::visibility::OfferKind::Resource;
    const CHANGE: Change = Change::Resources;
    const LIST: ListKind = ListKind::Resources;
    const LIST_METHOD: &'static str = ListResources::METHOD;

    fn register(resource: Resource) -> Result<Self> {
        let listed =
            serde_json::value::to_raw_value(&resource.definition).map_err(std::io::Error::other)?;
        Ok(RegisteredResource { resource, listed })
    }
}

impl Offered for RegisteredTemplate {
    type Value = ResourceTemplate;
    const KIND: &'static str = "resource template";
    const OFFER: Offer = Offer::Resources;
    const VISIBLE_AS: crate::tools::visibility::OfferKind =
        crate::tools::visibility::OfferKind::Template;
    const CHANGE: Change = Change::Resources;
    const LIST: ListKind = ListKind::Templates;
    const LIST_METHOD: &'static str = ListResourceTemplates::METHOD;

    fn register(template: ResourceTemplate) -> Result<Self> {
        let uri_template = &template.definition.uri_template;
        let parsed = UriTemplate::parse(uri_template).map_err(|reason| Error::InvalidTemplate {
            template: uri_template.clone(),
            reason,
        })?;
        let listed =
            serde_json::value::to_raw_value(&template.definition).map_err(std::io::Error::other)?;
        Ok(RegisteredTemplate {
            template,
            parsed,
            listed,
        })
    }
}

/// Registers several prompts, resources or templates: all or none.
pub(crate) fn register_all<E: Offered>(catalog: &Catalog<E>, values: Vec<E::Value>) -> Result<()> {
    let entries = values
        .into_iter()
        .map(|value| E::register(value).map(Arc::new))
        .collect::<Result<Vec<_>>>()?;
    catalog
        .add_all(entries)
        .map_err(|key| Error::Duplicate { kind: E::KIND, key })
}

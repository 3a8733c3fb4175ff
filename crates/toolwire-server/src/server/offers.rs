//! The prompts and resources of a running [`Server`]: added and removed at runtime (listen
//! streams told), and the resources its listeners follow.

use crate::error::{Error, Result};
use crate::request::followed::FollowedResources;
use crate::server::Server;
use crate::tools::catalog::Catalog;
use crate::tools::offered::{Change, Offer, Offered, register_all};
use crate::tools::prompt::Prompt;
use crate::tools::resource::{Resource, ResourceTemplate};

impl Server {
    /// Registers a prompt at runtime; listen streams that asked are told (promptsListChanged).
    pub fn add_prompt(&self, prompt: Prompt) -> Result<()> {
        self.add_offered(&self.inner.prompts, prompt)
    }

    /// Removes a prompt at runtime.
    pub fn remove_prompt(&self, name: &str) -> Result<()> {
        self.remove_offered(&self.inner.prompts, name)
    }

    /// The registered prompt names in listing order.
    pub fn prompt_names(&self) -> Vec<String> {
        self.inner
            .prompts
            .snapshot()
            .items
            .iter()
            .map(|p| p.prompt.definition.name.clone())
            .collect()
    }

    /// Registers a resource at runtime; listen streams that asked are told (resourcesListChanged).
    pub fn add_resource(&self, resource: Resource) -> Result<()> {
        self.add_offered(&self.inner.resources, resource)
    }

    /// Removes a resource at runtime.
    pub fn remove_resource(&self, uri: &str) -> Result<()> {
        self.remove_offered(&self.inner.resources, uri)
    }

    /// Registers a resource template at runtime.
    pub fn add_resource_template(&self, template: ResourceTemplate) -> Result<()> {
        self.add_offered(&self.inner.templates, template)
    }

    /// Removes a resource template at runtime.
    pub fn remove_resource_template(&self, uri_template: &str) -> Result<()> {
        self.remove_offered(&self.inner.templates, uri_template)
    }

    /// Tells listen streams subscribed to `uri` (or to a resource it is under) that its
    /// contents changed (`notifications/resources/updated`, R-08).
    pub fn notify_resource_updated(&self, uri: &str) {
        self.notify(Change::ResourceUpdated(uri.into()));
    }

    /// The resource URIs this instance's listeners follow, as it changes: the
    /// `resourceSubscriptions` its open listen streams were acknowledged (those the caller
    /// may read), and the `resources/subscribe` of the legacy sessions that listen here (on
    /// stdio, or on their GET stream). For an embedder that relays changes from elsewhere
    /// with [`Server::notify_resource_updated`], to follow there only what someone follows
    /// here. It changes only when a stream opens or closes or a legacy session subscribes or
    /// unsubscribes.
    pub fn followed_resources(&self) -> FollowedResources {
        self.inner.followers.watch()
    }

    /// Adds one prompt, resource or template, if the server offers its kind, and tells listen
    /// streams.
    fn add_offered<E: Offered>(&self, catalog: &Catalog<E>, value: E::Value) -> Result<()> {
        self.check_offered(E::OFFER)?;
        register_all(catalog, vec![value])?;
        self.notify(E::CHANGE);
        Ok(())
    }

    /// Removes one prompt, resource or template by its key, and tells listen streams.
    fn remove_offered<E: Offered>(&self, catalog: &Catalog<E>, key: &str) -> Result<()> {
        if !catalog.remove(key) {
            return Err(Error::Unknown {
                kind: E::KIND,
                key: key.to_owned(),
            });
        }
        self.notify(E::CHANGE);
        Ok(())
    }

    /// Whether the server declared the capability that registering at runtime needs.
    fn check_offered(&self, offer: Offer) -> Result<()> {
        if self.inner.offers.has(offer) {
            return Ok(());
        }
        Err(Error::NotOffered(match offer {
            Offer::Prompts => "prompts",
            Offer::Resources => "resources",
        }))
    }
}

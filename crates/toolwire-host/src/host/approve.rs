//! A person's approval of a changed tool definition: its new pin, and the tool callable again.

use std::sync::Arc;

use super::{Host, HostError, HostEvent};
use crate::pins::PinState;

impl Host {
    /// Accepts a changed tool's listed definition as its new pin, after a person reviewed
    /// [`ServerStatus::pins`](super::ServerStatus::pins). The audit log records it.
    pub fn approve_change(&self, qualified: &str) -> Result<bool, HostError> {
        self.approve(qualified, None)
    }

    /// [`Host::approve_change`] of exactly the definition a person reviewed, by its hash (the
    /// `listed` hash of [`PinState::Changed`]): `false`, approving nothing, when the tool is no
    /// longer listed or its listed definition is no longer that one (it changed again since
    /// the person looked). A definition that changes while the approval is being made stays
    /// withheld: only the reviewed one is pinned.
    pub fn approve_reviewed(&self, qualified: &str, reviewed: &str) -> Result<bool, HostError> {
        self.approve(qualified, Some(reviewed))
    }

    fn approve(&self, qualified: &str, reviewed: Option<&str>) -> Result<bool, HostError> {
        let Some(tool) = self.tool(qualified) else {
            return Ok(false);
        };
        if reviewed.is_some_and(|reviewed| crate::pins::definition_hash(&tool.listed) != reviewed) {
            return Ok(false);
        }
        let hash = self
            .pins
            .approve(&tool.server, &tool.definition.name, &tool.listed)?;
        let pinned = PinState::Pinned(hash.clone());
        // Under the host's lock: only a listing of the definition approved becomes pinned (one
        // listed since, which differs, stays withheld).
        self.update(&tool.server, |entry| {
            for listed in Arc::make_mut(&mut entry.listed) {
                if listed.definition.name == tool.definition.name
                    && listed.pin.is_some()
                    && crate::pins::definition_hash(&listed.listed) == hash
                {
                    listed.pin = Some(pinned.clone());
                }
            }
        })?;
        self.record(HostEvent::ChangeApproved {
            server: &tool.server,
            tool: qualified,
            hash: &hash,
        });
        Ok(true)
    }
}

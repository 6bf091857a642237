//! Loading components: compile (or map from the cache), check the policy,
//! list the tools, offer them; at a start, first from the listings kept at
//! the components' last load.

use std::sync::Arc;

use futures::StreamExt as _;
use tokio::sync::watch;

use super::kept::Listing;
use super::preparing::{blocking, check_interpreter_policy, identify, resolve_policy};
use super::{ComponentSource, HostError, LoadOptions, LoadReport, ToolHost};
use crate::bindings::types;
use crate::context::CallContext;
use crate::registry::{Code, ComponentEntry, ToolEntry};
use crate::report::ComponentIdentity;
use crate::runtime::{CallPolicy, KeptInstances, LoadError, LoadFileError};
use crate::specs;
use wasm_agent_policy::ValidPolicy;

/// A component compiled and checked, not yet offered.
struct Prepared {
    report: LoadReport,
    entries: Vec<ToolEntry>,
    /// What it listed, as a start keeps it.
    listing: Listing,
}

/// A component offered from its kept listing while it loads.
struct Offered {
    listing: Listing,
    /// Dropped once the loaded component replaced the offer (or its load
    /// failed and the offer was withdrawn): calls waiting for it go on.
    _loading: watch::Sender<()>,
}

/// What every load checks before any code: the component's name, prefix,
/// origin and policy.
#[derive(Clone)]
struct Identified {
    id: String,
    prefix: String,
    origin: Arc<str>,
    policy: ValidPolicy,
}

impl ToolHost {
    /// Loads a component under `policy`.
    pub async fn load(
        &self,
        source: impl Into<ComponentSource>,
        policy: wasm_agent_policy::Policy,
    ) -> Result<LoadReport, HostError> {
        self.load_with(source, LoadOptions::new(policy)).await
    }

    /// Loads a component: compiles it (or takes it from the cache), runs its
    /// `list-tools` under its policy, checks every spec, and adds its tools.
    pub async fn load_with(
        &self,
        source: impl Into<ComponentSource>,
        options: LoadOptions,
    ) -> Result<LoadReport, HostError> {
        let prepared = self.prepare(source.into(), options, None).await?;
        self.install(prepared.report, prepared.entries, false)
    }

    /// Loads several components at once: they compile (or come from the
    /// cache) in parallel, and their tools are added in the order given,
    /// each as soon as it and those before it are ready (so which of two
    /// clashing names wins does not depend on timing, and a slow component
    /// holds back only those after it). Stops at the first that fails in
    /// that order; those before it stay loaded.
    pub async fn load_all(
        &self,
        components: impl IntoIterator<Item = (ComponentSource, LoadOptions)>,
    ) -> Result<Vec<LoadReport>, HostError> {
        self.load_all_listing(components, || ()).await
    }

    /// [`load_all`](Self::load_all), offering the tools at once where it
    /// can: a component file unchanged since its last load, whose compiled
    /// code is in the cache, is offered from the listing that load kept
    /// (in order, up to the first that has none), and its calls wait until
    /// it is loaded. `listed` is called once every component's tools are
    /// offered, from kept listings or loaded. Each component is still
    /// loaded and lists its tools again; where that listing differs from
    /// the kept one, it replaces it and its report says so
    /// ([`LoadReport::listing_changed`]).
    pub async fn load_all_listing(
        &self,
        components: impl IntoIterator<Item = (ComponentSource, LoadOptions)>,
        listed: impl FnOnce(),
    ) -> Result<Vec<LoadReport>, HostError> {
        let components: Vec<_> = components.into_iter().collect();
        let mut offered = Vec::with_capacity(components.len());
        // An offered component's policy is resolved once, for its offer and
        // its load.
        let mut identified = Vec::with_capacity(components.len());
        for (source, options) in &components {
            match self.offer_kept(source, options).await {
                Some((offer, known)) => {
                    offered.push(Some(offer));
                    identified.push(Some(known));
                }
                None => break,
            }
        }
        let mut listed = Some(listed);
        if offered.len() == components.len()
            && let Some(listed) = listed.take()
        {
            listed();
        }
        offered.resize_with(components.len(), || None);
        identified.resize_with(components.len(), || None);
        let ids: Vec<Option<String>> = components
            .iter()
            .map(|(source, options)| identify(source, options).ok().map(|(id, _)| id))
            .collect();
        let mut prepared: futures::stream::FuturesOrdered<_> = components
            .into_iter()
            .zip(identified)
            .map(|((source, options), known)| self.prepare(source, options, known))
            .collect();
        let mut reports = Vec::with_capacity(prepared.len());
        while let Some(component) = prepared.next().await {
            let index = reports.len();
            // Dropped (waking the calls waiting for it) only once the
            // component's tools are installed, or its offers withdrawn.
            let offer = offered[index].take();
            let kept = offer.as_ref().map(|offer| &offer.listing);
            match component.and_then(|component| self.replace_offer(component, kept)) {
                Ok(report) => reports.push(report),
                Err(error) => {
                    self.withdraw(&ids[index..]);
                    return Err(error);
                }
            }
        }
        if let Some(listed) = listed {
            listed();
        }
        Ok(reports)
    }

    /// Loads a new version of a component, replacing the tools of the loaded
    /// component with the same name in one step (or adding them if there is
    /// none). If the new version fails to load, the old one stays. Calls in
    /// flight finish on the version they started on.
    pub async fn reload_with(
        &self,
        source: impl Into<ComponentSource>,
        options: LoadOptions,
    ) -> Result<LoadReport, HostError> {
        let prepared = self.prepare(source.into(), options, None).await?;
        self.install(prepared.report, prepared.entries, true)
    }

    /// Checks, without compiling, what loading `source` with `options`
    /// checks first: its name and prefix, that its file opens, and its policy
    /// (folders exist, variables are set). A server can refuse bad input
    /// this way before it starts answering, and load in the background.
    pub async fn check(
        &self,
        source: &ComponentSource,
        options: &LoadOptions,
    ) -> Result<(), HostError> {
        let (id, _) = identify(source, options)?;
        if let ComponentSource::File(path) = source {
            std::fs::File::open(path).map_err(|reason| HostError::Read {
                path: path.clone(),
                reason,
            })?;
        }
        resolve_policy(&id, options.policy.clone()).await.map(drop)
    }

    /// Offers a component's tools from the listing kept at its last load,
    /// if it has one (see [`load_all_listing`](Self::load_all_listing)),
    /// with what was checked of it for that.
    async fn offer_kept(
        &self,
        source: &ComponentSource,
        options: &LoadOptions,
    ) -> Option<(Offered, Identified)> {
        let ComponentSource::File(path) = source else {
            return None;
        };
        let host = self.clone();
        let path = path.clone();
        let (digest, bytes) = blocking(move || host.inner.sandbox.kept_listing(&path)).await??;
        let listing = Listing::from_bytes(&bytes)?;
        let identified = identified(source, options.clone()).await.ok()?;
        let (sender, loading) = watch::channel(());
        let facts = Facts {
            digest,
            interpreter: listing.interpreter,
            uses_state: listing.uses_state,
        };
        let component = self
            .component_entry(identified.clone(), options, facts, Code::Coming(loading))
            .ok()?;
        let (report, entries) =
            offered_tools(&component, &identified.prefix, listing.specs()).ok()?;
        self.install(report, entries, false).ok()?;
        let offer = Offered {
            listing,
            _loading: sender,
        };
        Some((offer, identified))
    }

    /// Installs a loaded component in place of its offer (`kept`, the
    /// listing it was offered from), if it had one. A listing that differs
    /// may take a name a later component is offered under: that offer is
    /// withdrawn, and that component installed as it loads.
    fn replace_offer(
        &self,
        component: Prepared,
        kept: Option<&Listing>,
    ) -> Result<LoadReport, HostError> {
        let Prepared {
            report,
            entries,
            listing,
        } = component;
        let Some(kept) = kept else {
            return self.install(report, entries, false);
        };
        let changed = *kept != listing;
        if changed {
            for entry in &entries {
                self.inner
                    .tools
                    .remove_coming_of_another(&entry.info.name, &report.component);
            }
        }
        let mut report = self.install(report, entries, true)?;
        report.listing_changed = changed;
        Ok(report)
    }

    /// Withdraws the tools of the components named `ids` that are offered
    /// from kept listings (loaded ones stay).
    fn withdraw(&self, ids: &[Option<String>]) {
        for id in ids.iter().flatten() {
            self.inner.tools.remove_coming(id);
        }
    }

    /// Compiles a component and checks its tool specs, without adding them;
    /// `known`, what was checked of it already, if anything.
    async fn prepare(
        &self,
        source: ComponentSource,
        options: LoadOptions,
        known: Option<Identified>,
    ) -> Result<Prepared, HostError> {
        let identified = match known {
            Some(known) => known,
            None => identified(&source, options.clone()).await?,
        };
        let id = identified.id.clone();
        let keep_listing = matches!(source, ComponentSource::File(_));
        let host = self.clone();
        let component_id = id.clone();
        let loaded = blocking(move || {
            let sandbox = &host.inner.sandbox;
            let load_error = |reason| HostError::Load {
                component: component_id.clone(),
                reason,
            };
            match source {
                ComponentSource::File(path) => sandbox.load_file(&path).map_err(|e| match e {
                    LoadFileError::Read(reason) => HostError::Read { path, reason },
                    LoadFileError::Load(reason) => load_error(reason),
                }),
                ComponentSource::Bytes { bytes, .. } => sandbox.load(&bytes).map_err(load_error),
            }
        })
        .await
        .ok_or_else(|| HostError::ShuttingDown(id.clone()))??;
        let facts = Facts {
            digest: loaded.digest,
            interpreter: loaded.is_interpreter(),
            uses_state: loaded.uses_state,
        };
        let (cache, load_time) = (loaded.cache, loaded.load_time);
        let prefix = identified.prefix.clone();
        let component = self.component_entry(identified, &options, facts, Code::Ready(loaded))?;
        let specs = self.list_tools(&component).await?;
        let listing = Listing::new(facts.interpreter, facts.uses_state, &specs);
        let (mut report, entries) = offered_tools(&component, &prefix, specs)?;
        (report.cache, report.load_time) = (cache, load_time);
        if keep_listing {
            let (host, bytes) = (self.clone(), listing.to_bytes());
            blocking(move || host.inner.sandbox.keep_listing(&facts.digest, &bytes)).await;
        }
        Ok(Prepared {
            report,
            entries,
            listing,
        })
    }

    /// Runs a loaded component's `list-tools` under its policy.
    async fn list_tools(
        &self,
        component: &ComponentEntry,
    ) -> Result<Vec<types::ToolSpec>, HostError> {
        let Code::Ready(loaded) = &component.code else {
            unreachable!("only a loaded component lists its tools");
        };
        let imports = self.host_imports(
            component,
            &format!("{}/list-tools", component.id),
            "load".into(),
            "list-tools",
            &CallContext::default(),
        );
        self.inner
            .sandbox
            .list_tools(loaded, &component.policy, imports)
            .await
            .map_err(|e| HostError::Load {
                component: component.id.to_string(),
                reason: LoadError::ListTools(e),
            })
    }

    /// A component's entry, its digest and policy checked.
    fn component_entry(
        &self,
        identified: Identified,
        options: &LoadOptions,
        facts: Facts,
        code: Code,
    ) -> Result<Arc<ComponentEntry>, HostError> {
        let Identified {
            id, origin, policy, ..
        } = identified;
        let actual = format!("sha256:{}", hex::encode(facts.digest));
        if let Some(expected) = &options.expected_digest
            && *expected != actual
        {
            return Err(HostError::WrongDigest {
                component: id,
                expected: expected.clone(),
                actual,
            });
        }
        if facts.interpreter {
            check_interpreter_policy(&id, &policy)?;
        }
        let state_scope: Arc<str> = match &options.state_scope {
            Some(name) => format!("alias:{name}").into(),
            None => actual.clone().into(),
        };
        Ok(Arc::new(ComponentEntry {
            id: id.as_str().into(),
            identity: ComponentIdentity {
                name: id.as_str().into(),
                source: origin,
                digest: actual.into(),
            },
            state_scope,
            code,
            interpreter: facts.interpreter,
            uses_state: facts.uses_state,
            dependencies: Arc::new(policy.dependencies.clone()),
            kept: policy
                .keep_instance
                .then(|| KeptInstances::new(policy.kept_idle, self.inner.sandbox.kept_budget())),
            policy: CallPolicy::new(policy),
        }))
    }

    /// Adds a component's tools, first removing those of the component
    /// with the same name when `replace` is set.
    fn install(
        &self,
        report: LoadReport,
        entries: Vec<ToolEntry>,
        replace: bool,
    ) -> Result<LoadReport, HostError> {
        self.inner
            .tools
            .install(&report.component, entries, replace)?;
        Ok(report)
    }
}

/// What is known of a component's code before it is mapped.
#[derive(Clone, Copy)]
struct Facts {
    digest: [u8; 32],
    interpreter: bool,
    uses_state: bool,
}

/// Identifies a component and resolves its policy.
async fn identified(
    source: &ComponentSource,
    options: LoadOptions,
) -> Result<Identified, HostError> {
    let (id, prefix) = identify(source, &options)?;
    let origin: Arc<str> = match (&options.origin, source) {
        (Some(origin), _) => origin.as_str().into(),
        (None, ComponentSource::File(path)) => path.display().to_string().into(),
        (None, ComponentSource::Bytes { name, .. }) => format!("bytes:{name}").into(),
    };
    let policy = resolve_policy(&id, options.policy).await?;
    Ok(Identified {
        id,
        prefix,
        origin,
        policy,
    })
}

/// A component's tools' entries, every spec checked, and its report.
fn offered_tools(
    component: &Arc<ComponentEntry>,
    prefix: &str,
    specs: Vec<types::ToolSpec>,
) -> Result<(LoadReport, Vec<ToolEntry>), HostError> {
    let entries =
        specs::check_specs(specs, prefix, component).map_err(|reason| HostError::Spec {
            component: component.id.to_string(),
            reason,
        })?;
    let report = LoadReport {
        component: component.id.to_string(),
        tools: entries.iter().map(|e| e.info.name.clone()).collect(),
        cache: crate::runtime::CacheOutcome::Hit,
        load_time: std::time::Duration::ZERO,
        listing_changed: false,
    };
    Ok((report, entries))
}

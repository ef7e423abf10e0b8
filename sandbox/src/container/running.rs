//! A started container: its engine client's process group and the container by name,
//! waited on with a wall-clock or stall limit, paused and resumed (an idle server), and stopped (`<engine> stop`, the client's
//! group, then `<engine> rm -f`) on request or when dropped. Building the command line is
//! `arguments`'s; the run's cleanup by label is the parent's.

use std::net::IpAddr;
use std::thread;
use std::time::{Duration, Instant};

use crate::process::{ChildGroup, Finished, Stopped, tail};

use super::{ContainerError, Engine, Launch};

/// A started container: its engine client's process group, and the container by name.
///
/// Dropping it stops it (see [`Container::stop`]).
#[derive(Debug)]
pub struct Container {
    engine: Engine,
    name: String,
    grace: Duration,
    client: ChildGroup,
    stopped: Option<Stopped>,
    /// Paused by [`Container::pause`] and not resumed since.
    paused: bool,
}

impl Container {
    /// Starts the engine client of `launch` in its own process group.
    pub fn start(engine: &Engine, launch: &Launch) -> Result<Container, ContainerError> {
        let client = ChildGroup::spawn(&launch.spec)?;
        Ok(Container {
            engine: engine.clone(),
            name: launch.name.clone(),
            grace: launch.spec.grace,
            client,
            stopped: None,
            paused: false,
        })
    }

    /// The container's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The engine client's process group: for [`crate::process::wait_healthy`], which fails
    /// fast when it exits, and for its log.
    pub fn client(&mut self) -> &mut ChildGroup {
        &mut self.client
    }

    /// Waits until the container has its address on network `network` (its side's,
    /// [`super::side_network_name`]) and returns it: where the host reaches a server. Fails
    /// when the client exits first, or after `timeout`.
    pub fn wait_address(
        &mut self,
        network: &str,
        timeout: Duration,
    ) -> Result<IpAddr, ContainerError> {
        let deadline = crate::process::deadline_after(timeout);
        loop {
            let last = match self.engine.address(&self.name, network) {
                Ok(address) => return Ok(address),
                Err(error) => error,
            };
            if let Some(status) = self.client.try_wait()? {
                // The client is gone: its group is stopped so that its log is complete.
                self.client.stop()?;
                return Err(ContainerError::Exited {
                    name: self.name.clone(),
                    network: network.to_owned(),
                    status,
                    log: self.client.log().to_path_buf(),
                    tail: tail(self.client.log(), 40)
                        .unwrap_or_else(|error| format!("(cannot read the log: {error})")),
                });
            }
            if Instant::now() >= deadline {
                return Err(ContainerError::AddressTimedOut {
                    name: self.name.clone(),
                    network: network.to_owned(),
                    timeout,
                    last: last.to_string(),
                });
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits for the command to end; after `timeout`, stops the container
    /// ([`Container::stop`]). The exit status is the engine client's: the command's, or 125
    /// to 127 when the engine could not run it.
    pub fn wait_with_timeout(&mut self, timeout: Duration) -> Result<Finished, ContainerError> {
        self.wait_with_limits(&crate::process::Limits::wall_clock(timeout))
    }

    /// [`Container::wait_with_timeout`], and also stops the container when nothing of what
    /// `limits.stall` watches changes for its limit (`crate::process::ProgressWatch`).
    pub fn wait_with_limits(
        &mut self,
        limits: &crate::process::Limits,
    ) -> Result<Finished, ContainerError> {
        let mut waiter = crate::process::Waiter::new(limits);
        loop {
            if let Some(status) = self.client.try_wait()? {
                let stopped = self.client.stop()?;
                self.stopped = Some(stopped);
                return Ok(Finished::Exited(status));
            }
            if let Some(ending) = waiter.ended() {
                return self.stop().map(|stopped| ending.finished(stopped));
            }
            waiter.pause();
        }
    }

    /// Pauses the container ([`Engine::pause`]): its processes do nothing until
    /// [`Container::resume`]; [`Container::stop`] resumes it first.
    pub fn pause(&mut self) -> Result<(), ContainerError> {
        self.engine.pause(&self.name)?;
        self.paused = true;
        // A runner stopped by a signal unpauses it first (`process::remember_thaw`).
        let (engine, name) = (self.engine.clone(), self.name.clone());
        crate::process::remember_thaw(
            &self.name,
            Box::new(move || {
                let _ = engine.unpause(&name);
            }),
        );
        Ok(())
    }

    /// Resumes a container [`Container::pause`] paused; nothing for one that is not.
    pub fn resume(&mut self) -> Result<(), ContainerError> {
        if std::mem::take(&mut self.paused) {
            crate::process::forget_thaw(&self.name);
            self.engine.unpause(&self.name)?;
        }
        Ok(())
    }

    /// Stops the container and its client: `<engine> stop` (the command gets `SIGTERM`, then
    /// `SIGKILL` after the grace period), then the client's process group, then `<engine> rm
    /// -f` in case the container was still being created. A container that has already gone
    /// is not an error. A second call returns the first one's answer.
    pub fn stop(&mut self) -> Result<Stopped, ContainerError> {
        if let Some(stopped) = self.stopped {
            return Ok(stopped);
        }
        // An engine refuses to stop a paused container; `rm -f` below would still remove it.
        let _ = self.resume();
        let stop = self.engine.stop(&self.name, self.grace);
        let stopped = self.client.stop()?;
        self.stopped = Some(stopped);
        let remove = self.engine.remove(&self.name);
        for result in [stop, remove] {
            match result {
                Err(error) if !error.is_no_such_container() => return Err(error),
                _ => {}
            }
        }
        Ok(stopped)
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        if self.stopped.is_none() {
            // Nobody is left to tell; the run's cleanup by label is the backstop.
            let _ = self.stop();
        }
    }
}

//! `nervix state backup|restore`: the runtime state a node keeps in its data directory
//! (deduplication keyspaces with first sightings, windows, OFFSET BY DOMAIN offsets), copied to
//! one file and installed from one (`runtime::state_store::{backup, restore}`).
//!
//! `backup` may run while the node runs (it copies the last committed snapshots); `restore`
//! needs the node stopped and replaces the state the data directory held.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use nervix::runtime::state_store::{backup, restore, BackupSummary};

use super::Status;

#[derive(Args)]
pub struct StateArguments {
    #[command(subcommand)]
    action: StateAction,
}

#[derive(Subcommand)]
enum StateAction {
    /// Copy the node's runtime state into FILE (must not exist).
    Backup {
        /// The node's data directory.
        #[arg(long)]
        data_dir: PathBuf,
        /// The backup file to write.
        #[arg(long = "to", value_name = "FILE")]
        to: PathBuf,
    },
    /// Replace a stopped node's runtime state with a backup file.
    Restore {
        /// The node's data directory (the node must not be running).
        #[arg(long)]
        data_dir: PathBuf,
        /// The backup file to install.
        #[arg(long = "from", value_name = "FILE")]
        from: PathBuf,
    },
}

fn describe(summary: BackupSummary) -> String {
    format!(
        "{} processor branch snapshots, {} Kafka partition offsets",
        summary.processor_branches, summary.kafka_partitions
    )
}

/// `nervix state …`.
pub fn run(arguments: &StateArguments) -> anyhow::Result<Status> {
    match &arguments.action {
        StateAction::Backup { data_dir, to } => {
            if to.exists() {
                anyhow::bail!("{} exists; a backup never overwrites a file", to.display());
            }
            let summary = backup(data_dir, to).context("backup failed")?;
            println!("backed up {} to {}", describe(summary), to.display());
        }
        StateAction::Restore { data_dir, from } => {
            let summary = restore(data_dir, from).context("restore failed")?;
            println!("restored {} into {}", describe(summary), data_dir.display());
        }
    }
    Ok(Status::Success)
}

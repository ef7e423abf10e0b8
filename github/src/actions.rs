//! GitHub Actions' words that prgate reads: how a job a workflow `needs` ended
//! (`needs.<job>.result`), and whether such a job ran to its end ([`JobsResult::completed`]).

/// How the node jobs ended, as the workflow's `needs.<job>.result` says (`--jobs`). Any other
/// word is kept, not refused: a finish stage that cannot parse its flags would leave the
/// status pending, so an unknown result is an error posted like a failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobsResult {
    Success,
    Skipped,
    Failure,
    Cancelled,
    Other(String),
}

impl JobsResult {
    /// The result `text` names; never fails (an unknown word is [`JobsResult::Other`]).
    pub fn parse(text: &str) -> Result<JobsResult, std::convert::Infallible> {
        Ok(match text {
            "success" => JobsResult::Success,
            "skipped" => JobsResult::Skipped,
            "failure" => JobsResult::Failure,
            "cancelled" => JobsResult::Cancelled,
            other => JobsResult::Other(other.to_owned()),
        })
    }

    /// Whether the jobs ran to their end: `success`, or `skipped` (a job with nothing to do).
    /// Anything else (a failure, a cancellation, a word prgate does not know) means some of
    /// what they were to record is missing: `prgate ci`'s finish stage posts `error`.
    pub fn completed(&self) -> bool {
        matches!(self, JobsResult::Success | JobsResult::Skipped)
    }

    /// The word, as the workflow wrote it.
    pub fn as_str(&self) -> &str {
        match self {
            JobsResult::Success => "success",
            JobsResult::Skipped => "skipped",
            JobsResult::Failure => "failure",
            JobsResult::Cancelled => "cancelled",
            JobsResult::Other(other) => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::JobsResult;

    #[test]
    fn every_jobs_result_reads_back_and_an_unknown_one_is_kept() {
        for word in ["success", "skipped", "failure", "cancelled", "", "timed_out"] {
            let result = JobsResult::parse(word).unwrap_or_else(|never| match never {});
            assert_eq!(result.as_str(), word);
            let known = !matches!(result, JobsResult::Other(_));
            assert_eq!(known, ["success", "skipped", "failure", "cancelled"].contains(&word));
            assert_eq!(result.completed(), ["success", "skipped"].contains(&word));
        }
    }
}

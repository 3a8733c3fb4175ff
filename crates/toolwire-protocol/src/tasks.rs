//! The tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663): a `tools/call` may become a
//! task the client polls with `tasks/get`, feeds with `tasks/update` and stops with
//! `tasks/cancel`. Opt-in per request through `clientCapabilities.extensions`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{ErrorObject, InputRequests, InputResponses, RequestMeta, ResultMeta, ResultType};

/// The extension's identifier, in client and server `capabilities.extensions`.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// Where a task is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Running.
    Working,
    /// Waiting for `tasks/update` with answers to its input requests.
    InputRequired,
    /// Done; `result` holds the tool's result (which may report a tool error).
    Completed,
    /// Ended with a JSON-RPC error in `error`.
    Failed,
    /// Cancelled by `tasks/cancel`.
    Cancelled,
}

impl TaskStatus {
    /// Whether the task will not change any more.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled
        )
    }
}

/// The fields every task view shares.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskInfo {
    /// Opaque, unguessable identifier.
    pub task_id: String,
    /// Where the task is.
    pub status: TaskStatus,
    /// Human-readable status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    /// ISO-8601 creation time.
    pub created_at: String,
    /// ISO-8601 time of the last change.
    pub last_updated_at: String,
    /// How long the task is kept after creation, in milliseconds; `null` for unlimited.
    pub ttl_ms: Option<u64>,
    /// Suggested polling interval in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_interval_ms: Option<u64>,
}

/// A `tools/call` result that started a task (`resultType: "task"`, flat).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateTaskResult {
    /// Always `task`.
    pub result_type: ResultType,
    /// The task.
    #[serde(flatten)]
    pub task: TaskInfo,
    /// Result metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<ResultMeta>,
}

/// The result of `tasks/get`: the task and, by status, its input requests, result or error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetTaskResult {
    /// Always `complete`.
    pub result_type: ResultType,
    /// The task.
    #[serde(flatten)]
    pub task: TaskInfo,
    /// What the task waits for (status `input_required`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_requests: Option<InputRequests>,
    /// The tool's result (status `completed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// The error (status `failed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorObject>,
    /// Result metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<ResultMeta>,
}

/// Params of `tasks/get` and `tasks/cancel`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskParams {
    /// Request metadata.
    #[serde(rename = "_meta")]
    pub meta: RequestMeta,
    /// The task.
    pub task_id: String,
}

/// Params of `tasks/update`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateTaskParams {
    /// Request metadata.
    #[serde(rename = "_meta")]
    pub meta: RequestMeta,
    /// The task.
    pub task_id: String,
    /// Answers to (some of) the task's input requests.
    pub input_responses: InputResponses,
}

/// The civil date (year, month 1–12, day 1–31, proleptic Gregorian) of a day counted from
/// 1970-01-01 (H. Hinnant's algorithm).
pub fn civil_date(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month as u32, day as u32)
}

/// Formats milliseconds since the Unix epoch as ISO-8601 UTC (`2026-12-02T12:00:00.000Z`).
pub fn iso8601(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let (year, month, day) = civil_date(days);
    if !(0..=9999).contains(&year) {
        return format!(
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
            rem / 3600,
            rem % 3600 / 60,
            rem % 60,
            ms % 1000
        );
    }
    // Written digit by digit: this runs for every audited call.
    let mut out = *b"0000-00-00T00:00:00.000Z";
    let mut put = |at: usize, width: usize, mut value: u64| {
        for i in (at..at + width).rev() {
            out[i] = b'0' + (value % 10) as u8;
            value /= 10;
        }
    };
    put(0, 4, year as u64);
    put(5, 2, u64::from(month));
    put(8, 2, u64::from(day));
    put(11, 2, rem / 3600);
    put(14, 2, rem % 3600 / 60);
    put(17, 2, rem % 60);
    put(20, 3, ms % 1000);
    out.iter().map(|&b| char::from(b)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_times() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(iso8601(1_796_212_800_123), "2026-12-02T12:00:00.123Z");
    }

    #[test]
    fn create_task_result_is_flat() {
        let result = CreateTaskResult {
            result_type: ResultType::Task,
            task: TaskInfo {
                task_id: "t1".into(),
                status: TaskStatus::Working,
                status_message: None,
                created_at: iso8601(0),
                last_updated_at: iso8601(0),
                ttl_ms: Some(1000),
                poll_interval_ms: Some(500),
            },
            meta: None,
        };
        let json = serde_json::to_value(&result).unwrap();
        assert_eq!(json["resultType"], "task");
        assert_eq!(json["taskId"], "t1");
        assert_eq!(json["status"], "working");
        assert!(json.get("task").is_none());
    }
}

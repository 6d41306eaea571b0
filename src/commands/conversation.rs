//! Conversation views of a state: the last N messages, or one message by id (`inspect
//! --state --last N`, `--message ID`).

use crate::commands::inspect::StateReport;
use dfck_core::codec::Value;
use dfck_core::error::Error;
use dfck_core::materialize::reducers::message_id;

/// Which messages of the state to show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MessageSelection {
    /// The last N.
    Last(usize),
    /// The message with this id (or the one whose id starts with it).
    Id(String),
}

/// Keeps only the selected messages in the report's `messages` channel and records which
/// part of the conversation is shown. An id that names no message (or several, as a
/// prefix) is an error naming the candidates.
pub fn select_messages(r: &mut StateReport, sel: &MessageSelection) -> Result<(), Error> {
    let Some((_, Value::Array(msgs))) = r.values.0.iter_mut().find(|(k, _)| k == "messages") else {
        return Err(Error::Usage(format!(
            "checkpoint {} holds no messages list",
            r.checkpoint_id
        )));
    };
    let total = msgs.len();
    let (first, keep) = match sel {
        MessageSelection::Last(n) => {
            let first = total.saturating_sub(*n);
            (first, total - first)
        }
        MessageSelection::Id(id) => {
            let exact = msgs.iter().position(|m| message_id(m) == Some(id.as_str()));
            let found = match exact {
                Some(i) => i,
                None => {
                    let matches: Vec<usize> = (0..total)
                        .filter(|i| {
                            message_id(&msgs[*i]).is_some_and(|m| m.starts_with(id.as_str()))
                        })
                        .collect();
                    match matches[..] {
                        [one] => one,
                        [] => {
                            let ids: Vec<&str> = msgs.iter().filter_map(message_id).collect();
                            let near = dfck_core::suggest::nearest(id, ids.iter().copied());
                            let hint = if near.is_empty() {
                                String::new()
                            } else {
                                format!("; did you mean {}?", near.join(", "))
                            };
                            return Err(Error::Usage(format!(
                                "no message '{id}' at checkpoint {} ({total} messages){hint}",
                                r.checkpoint_id
                            )));
                        }
                        _ => {
                            let ids: Vec<&str> = matches
                                .iter()
                                .filter_map(|i| message_id(&msgs[*i]))
                                .collect();
                            return Err(Error::Usage(format!(
                                "message id prefix '{id}' is ambiguous: {}",
                                ids.join(", ")
                            )));
                        }
                    }
                }
            };
            (found, 1)
        }
    };
    msgs.drain(first + keep..);
    msgs.drain(..first);
    r.messages_shown = Some((first, total));
    Ok(())
}

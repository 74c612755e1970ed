//! Windowed judging of a stream (`window: sentence | paragraph | <n>` on every judged check of
//! the answer): each completed window of an answer channel is judged while held back, and its
//! text becomes releasable ([`ExchangeGuard::judged_up_to`]) once it passes — in order, so a
//! window is never released before the ones before it. Calls are pipelined: the next window
//! streams into the hold-back while the previous ones are judged. Other output text (refusals,
//! tool calls, unmodelled strings) is held to the end and judged with the answer's last
//! window. A failing window ends the stream like any violation: nothing of it, or after it,
//! was released.

use super::{GuardedStream, Judging};
use crate::delta::{Channel, Conversation, Delta};
use crate::judge::{Answer, JudgeEnv, Subject};
use crate::policy::judged::Window;
use crate::policy::{ChannelId, Policy};
use crate::proxy::judged::{judge_all, Judgement, Side};
use std::collections::VecDeque;
use std::sync::Arc;
use std::task::{Context, Poll};

pub(super) struct Windows {
    window: Window,
    env: JudgeEnv,
    conversation: Arc<Conversation>,
    policy: Arc<Policy>,
    keep_reasons: bool,
    /// Per answer channel: its text since the last cut, and where that text starts.
    open: Vec<Open>,
    /// Refusal text, judged with the last window.
    refusals: String,
    /// Windows under judgment, oldest first.
    pending: VecDeque<Pending>,
}

struct Open {
    channel: ChannelId,
    start: u64,
    text: String,
    /// `text[..scanned]` (`chars` characters) holds no cut: only what follows is looked at.
    scanned: usize,
    chars: usize,
}

struct Pending {
    /// The channel position the window ends at; `None` for the answer's last judgment.
    upto: Option<(ChannelId, u64)>,
    judging: Judging,
    done: Option<Judgement>,
}

impl Windows {
    pub(super) fn new(
        window: Window,
        env: JudgeEnv,
        conversation: Arc<Conversation>,
        policy: Arc<Policy>,
        keep_reasons: bool,
    ) -> Windows {
        Windows {
            window,
            env,
            conversation,
            policy,
            keep_reasons,
            open: Vec::new(),
            refusals: String::new(),
            pending: VecDeque::new(),
        }
    }

    fn judge(&self, text: String, tool_calls: Vec<(String, String)>) -> Judging {
        Box::pin(judge_all(
            self.env.clone(),
            Arc::clone(&self.policy),
            Side::Output,
            Subject {
                conversation: Arc::clone(&self.conversation),
                answer: Some(Answer { text, tool_calls }),
            },
            self.keep_reasons,
        ))
    }

    /// Takes a frame's answer text; every window it completes goes to its judges.
    pub(super) fn feed(&mut self, channel: Option<ChannelId>, delta: &Delta<'_>) {
        let Delta::Text {
            channel: kind,
            text,
            ..
        } = delta
        else {
            return;
        };
        match kind {
            Channel::Refusal => return self.refusals.push_str(text),
            Channel::Content => {}
            _ => return,
        }
        let Some(channel) = channel else { return };
        let i = match self.open.iter().position(|o| o.channel == channel) {
            Some(i) => i,
            None => {
                self.open.push(Open {
                    channel,
                    start: 0,
                    text: String::new(),
                    scanned: 0,
                    chars: 0,
                });
                self.open.len() - 1
            }
        };
        let open = &mut self.open[i];
        open.text.push_str(text);
        let Some(cut) = self
            .window
            .last_cut_after(&open.text, open.scanned, open.chars)
        else {
            open.chars += open.text[open.scanned..].chars().count();
            open.scanned = open.text.len();
            return;
        };
        let window: String = open.text.drain(..cut).collect();
        open.start += cut as u64;
        // What is left follows the last cut: looked at already.
        open.scanned = open.text.len();
        open.chars = open.text.chars().count();
        let upto = Some((channel, open.start));
        let judging = self.judge(window, Vec::new());
        self.pending.push_back(Pending {
            upto,
            judging,
            done: None,
        });
    }

    /// The answer ended: what is left of every channel, the refusals, the strings no decoder
    /// models (`unmodelled`) and the tool calls are judged last.
    pub(super) fn finish(&mut self, unmodelled: String, tool_calls: Vec<(String, String)>) {
        let mut rest: Vec<String> = self.open.drain(..).map(|o| o.text).collect();
        rest.push(std::mem::take(&mut self.refusals));
        rest.push(unmodelled);
        rest.retain(|t| !t.is_empty());
        let judging = if rest.is_empty() && tool_calls.is_empty() {
            Box::pin(std::future::ready(Judgement::default()))
        } else {
            self.judge(rest.join("\n\n"), tool_calls)
        };
        self.pending.push_back(Pending {
            upto: None,
            judging,
            done: None,
        });
    }
}

/// What the windows' judges decided since the last look.
enum Step {
    Nothing,
    Passed,
    Finished,
}

impl GuardedStream {
    /// Polls the windows under judgment; releases what passed, in order, or blocks. Returns
    /// true when something changed (the stream must be looked at again).
    pub(super) fn poll_windows(&mut self, cx: &mut Context<'_>) -> bool {
        let Some(windows) = &mut self.windows else {
            return false;
        };
        for p in windows.pending.iter_mut().filter(|p| p.done.is_none()) {
            if let Poll::Ready(j) = p.judging.as_mut().poll(cx) {
                p.done = Some(j);
            }
        }
        // A failing window ends the stream at once, whatever is still judged before it.
        let failed = windows
            .pending
            .iter_mut()
            .find_map(|p| p.done.as_mut().and_then(|j| j.block.take()));
        let mut step = Step::Nothing;
        let mut monitored = Vec::new();
        while let Some(front) = windows.pending.front() {
            if front.done.is_none() {
                break;
            }
            let Some(p) = windows.pending.pop_front() else {
                break;
            };
            monitored.extend(p.done.map(|j| j.monitored).unwrap_or_default());
            match p.upto {
                Some((channel, pos)) => {
                    self.guard.judged_up_to(channel, pos);
                    step = Step::Passed;
                }
                None => step = Step::Finished,
            }
        }
        if !monitored.is_empty() {
            self.reporter().monitor(&monitored);
        }
        if let Some(finding) = failed {
            self.windows = None;
            self.block(finding);
            return true;
        }
        match step {
            Step::Nothing => false,
            Step::Passed => {
                self.release_ready();
                true
            }
            Step::Finished => {
                self.windows = None;
                self.release_all();
                true
            }
        }
    }
}

// Package offline is the scripted model that runs when no model provider is
// configured. It lets the demo agents (the Cognitive Reasoner above all) show
// real orchestration without an API key, and it gives end-to-end tests a
// model whose every output is known in advance: the same Request always
// produces the same events.
//
// It does not understand language. It reads the structure of the Request and
// follows a few documented rules:
//
//   - Echo. When the latest user message contains the marker [offline:echo],
//     the text after the marker (leading white space removed) is streamed
//     back verbatim as the answer and no tool is called. Tests use it to put
//     exact text, HTML included, into the model output.
//   - Active sequence. When the orchestration snapshot names an active step
//     whose sequence is not complete (SequenceIndex < len(Sequence)), the
//     model calls the first tool of the group at SequenceIndex that is among
//     Request.Tools.
//   - Mode choice. Otherwise (the active step is the default step, has no
//     sequence, or has completed it; or there is no active step) the model
//     scores every non-default Mode that has a sequence against the latest
//     user message and follows the best one itself: its next tool is
//     Sequence[p], where p is how many of this turn's calls, in order,
//     matched the sequence so far, provided that tool is offered. The score
//     is described at modeScore and bestMode; ties go to the mode listed
//     first. A failed tool call still counts, because retrying the same
//     deterministic arguments would fail the same way.
//   - Only tool. When no mode fits and no tool was called yet in this turn,
//     and the active step is not the default step and offers one tool only,
//     the model calls that tool: the step the message led to made the
//     choice (a "quick answer" step that offers one search).
//   - Approval. When no mode fits, or the fitting mode's first tool is not
//     offered, and no tool was called yet in this turn, an offered tool
//     whose calls wait for a person's approval (Request.ApprovalTools) is
//     called first: the best-matching one, else the first listed. A real
//     model calls such a tool when it needs it; the demo calls it so that
//     the approval shows.
//   - Single tool. Otherwise, in the same case, the model calls the
//     offered tool whose name and description best match the message, if
//     one matches well enough (see bestTool); otherwise it calls nothing.
//   - Final answer. Otherwise it streams a markdown answer: a heading, a
//     statement that this is the offline demo model, one sub-heading per tool
//     result of this turn (in order) quoting the result's first lines, and a
//     conclusion. Without tool results it answers plainly and says that no
//     model provider is configured.
//
// A summarizer's call (Request.Summarize, context compaction) is answered
// with an extractive summary, all at once: one line per user message in
// its own words and one per tool result, its first line, marked when the
// call did not run or failed, after the lines of the summary it folds in.
// When they pass the summary's budget, tool lines go first, oldest first,
// then user lines from the middle of the conversation, so that its opening
// and its latest turns stay (see summary.go).
//
// A guardrail's model check (Request.Judge) is answered "yes" when the
// text contains, ignoring case (Unicode simple folding), one of the
// phrases the check's prompt puts in double quotes ("..." or “...”), and
// "no" otherwise: a prompt without quoted phrases is always answered no.
// So `Does the text ask for "medical advice" or a "diagnosis"?` holds for
// "I need a Diagnosis" offline, as a real model's answer would.
//
// It never calls a tool that is not in Request.Tools, makes at most one tool
// call per model call and at most maxTurnCalls per turn, and numbers calls
// "call_<n>" so that IDs are unique within the conversation it is given.
// Arguments are generated from each tool's JSON Schema (see arguments.go),
// whoever provides the tool (built in, an MCP server, an embedder):
// topic-like string fields get a topic phrase taken from the message,
// path-like fields ("path", "file", "dir") the path the message names or
// ".", other string fields get sectioned text about that topic, whose
// section headings are the bold headings the tool's description asks for
// when it names them. The arguments are checked against the schema with a
// JSON Schema validator before the call; when they fail, the required
// fields alone are sent, and when those fail too the call is an error.
//
// Text is streamed one word per event (a word with the white space that
// follows it), with Config.Delay between words; Temperature and MaxTokens are
// ignored because the output is scripted. Token usage is estimated at about
// four characters per token.
package offline

package offline

import (
	"context"
	"fmt"
	"iter"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
)

const (
	// DelayEnv names the environment variable that sets the pause between
	// streamed words, in whole milliseconds.
	DelayEnv = "OFFLINE_MODEL_DELAY_MS"
	// DefaultDelay is the pause between streamed words when DelayEnv is not
	// set: slow enough that a browser shows the answer arriving.
	DefaultDelay = 15 * time.Millisecond
	// MaxDelay bounds the delay DelayFromEnv accepts; a larger value is
	// almost certainly a unit mistake.
	MaxDelay = 10 * time.Second
	// DefaultName is the model name Info reports when Config.Name is empty.
	DefaultName = "offline-scripted"
	// EchoMarker in the latest user message makes the model stream the rest
	// of the message verbatim.
	EchoMarker = "[offline:echo]"
)

// maxTurnCalls bounds the tool calls of one turn, so that a template whose
// sequence can never complete still ends in an answer before the service's
// step limit cuts it off.
const maxTurnCalls = 12

// Config configures the offline model.
type Config struct {
	// Delay is the pause between streamed words. Zero streams at once;
	// a negative value is treated as zero.
	Delay time.Duration
	// Name is the model name reported by Info (default DefaultName).
	Name string
}

// Model is the offline scripted model. It keeps no state between calls and is
// safe for concurrent use.
type Model struct {
	delay time.Duration
	name  string
}

var _ llmorch.Model = (*Model)(nil)

// New returns the offline model for cfg. Every Config is usable, so New
// normalises instead of failing: a negative Delay becomes zero and an empty
// Name becomes DefaultName.
func New(cfg Config) *Model {
	m := &Model{delay: max(cfg.Delay, 0), name: strings.TrimSpace(cfg.Name)}
	if m.name == "" {
		m.name = DefaultName
	}
	return m
}

// DelayFromEnv reads DelayEnv: unset or empty gives DefaultDelay; otherwise it
// must be a whole number of milliseconds from 0 to MaxDelay.
func DelayFromEnv() (time.Duration, error) {
	raw, ok := os.LookupEnv(DelayEnv)
	raw = strings.TrimSpace(raw)
	if !ok || raw == "" {
		return DefaultDelay, nil
	}
	ms, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: want a whole number of milliseconds: %w", DelayEnv, raw, err)
	}
	if ms < 0 || time.Duration(ms) > MaxDelay/time.Millisecond {
		return 0, fmt.Errorf("%s=%q: want 0 to %d milliseconds", DelayEnv, raw, MaxDelay/time.Millisecond)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// Info reports provider "offline" and the configured name. The model
// calls only tools the request offers (Request.Callable), answers in the
// request's Format itself, and takes no attachments: it reads text only.
func (m *Model) Info() llmorch.Info {
	return llmorch.Info{Provider: "offline", Model: m.name, RestrictsTools: true, Formats: true}
}

// Stream runs one scripted model call: text deltas (one per word), at most
// one tool call, then one usage event.
func (m *Model) Stream(ctx context.Context, req llmorch.Request) iter.Seq2[chat.Event, error] {
	return func(yield func(chat.Event, error) bool) {
		if err := ctx.Err(); err != nil {
			yield(chat.Event{}, err)
			return
		}
		if req.Judge != nil {
			// A guardrail's model check: one word.
			text := judge(*req.Judge)
			if !yield(chat.Event{Kind: chat.KindTextDelta, Text: text}, nil) {
				return
			}
			u := estimateUsage(req, response{text: text})
			yield(chat.Event{Kind: chat.KindUsage, Usage: &u}, nil)
			return
		}
		if req.Summarize != nil {
			// A summarizer's call: the whole summary at once, no pause.
			text := summarize(req.Summarize)
			if !yield(chat.Event{Kind: chat.KindTextDelta, Text: text}, nil) {
				return
			}
			u := estimateUsage(req, response{text: text})
			yield(chat.Event{Kind: chat.KindUsage, Usage: &u}, nil)
			return
		}
		r, err := respond(req)
		if err != nil {
			yield(chat.Event{}, fmt.Errorf("offline model: %w", err))
			return
		}
		if !m.streamText(ctx, r.text, yield) {
			return
		}
		if r.call != nil {
			if err := ctx.Err(); err != nil {
				yield(chat.Event{}, err)
				return
			}
			if !yield(chat.Event{Kind: chat.KindToolCall, ToolCall: r.call}, nil) {
				return
			}
		}
		u := estimateUsage(req, r)
		yield(chat.Event{Kind: chat.KindUsage, Usage: &u}, nil)
	}
}

// streamText yields text word by word, pausing m.delay between words. It
// reports whether the caller should go on.
func (m *Model) streamText(ctx context.Context, text string, yield func(chat.Event, error) bool) bool {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for i, w := range splitWords(text) {
		if i > 0 && m.delay > 0 {
			if timer == nil {
				timer = time.NewTimer(m.delay)
			} else {
				timer.Reset(m.delay)
			}
			select {
			case <-ctx.Done():
				yield(chat.Event{}, ctx.Err())
				return false
			case <-timer.C:
			}
		} else if err := ctx.Err(); err != nil {
			yield(chat.Event{}, err)
			return false
		}
		if !yield(chat.Event{Kind: chat.KindTextDelta, Text: w}, nil) {
			return false
		}
	}
	return true
}

// splitWords cuts s into words, each with the white space that follows it
// (white space before the first word stays with the first word), so that the
// pieces concatenate to s.
func splitWords(s string) []string {
	var out []string
	start, seenWord, prevSpace := 0, false, false
	for i, r := range s {
		space := unicode.IsSpace(r)
		if !space {
			if seenWord && prevSpace {
				out = append(out, s[start:i])
				start = i
			}
			seenWord = true
		}
		prevSpace = space
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// estimateUsage counts about four characters per token, over what a provider
// would bill as prompt (system prompt, messages, tool specs) and completion.
func estimateUsage(req llmorch.Request, r response) chat.Usage {
	prompt := utf8.RuneCountInString(req.System) + utf8.RuneCountInString(req.Note)
	for _, msg := range req.Messages {
		prompt += len(msg.Role) + utf8.RuneCountInString(msg.Content)
		for _, c := range msg.ToolCalls {
			prompt += len(c.Name) + utf8.RuneCount(c.Arguments)
		}
	}
	for _, t := range req.Tools {
		prompt += len(t.Name) + utf8.RuneCountInString(t.Description) + utf8.RuneCount(t.Parameters)
	}
	completion := utf8.RuneCountInString(r.text)
	if r.call != nil {
		completion += len(r.call.Name) + utf8.RuneCount(r.call.Arguments)
	}
	u := chat.Usage{Prompt: tokens(prompt), Completion: tokens(completion)}
	u.Total = u.Prompt + u.Completion
	return u
}

func tokens(chars int) int64 { return int64((chars + 3) / 4) }

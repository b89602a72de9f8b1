package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/agentdock-go/agentdock/chat"
)

// The cognitive tools do no work of their own: the model writes the content
// and the tool frames it under a heading, so that the reasoning becomes a
// visible, typed step of the turn that orchestration conditions can track.
// Their value is in the descriptions, which ask the model for clearly
// sectioned content.

// Limits on what a model may put in a cognitive tool call; generous for real
// content, small enough that a runaway generation is refused with a clear
// message instead of being echoed back in full.
const (
	maxTitleLen = 500
	maxBodyLen  = 100_000
)

// cognitive is one framing tool: titleField becomes the heading, bodyField
// the content under it.
type cognitive struct {
	name        string
	description string
	heading     string
	titleField  string
	bodyField   string
	params      json.RawMessage
	aliases     map[string]string
	// confidence adds the optional 0..1 "confidence" field (reflect).
	confidence bool
}

// Names of the cognitive tools.
const (
	ThinkName      = "think"
	ReflectName    = "reflect"
	CritiqueName   = "critique"
	DebateName     = "debate"
	BrainstormName = "brainstorm"
	CompareName    = "compare"
)

// agentDockTopic is AgentDock's name for the topic of think, reflect and
// compare; accepted so that AgentDock prompts and few-shot examples keep
// working.
const agentDockTopic = "adTopic"

// CognitiveTools returns think, reflect, critique, debate, brainstorm and
// compare.
func CognitiveTools() []Tool {
	return []Tool{Think(), Reflect(), Critique(), Debate(), Brainstorm(), Compare()}
}

// Think frames step-by-step reasoning about a topic.
func Think() Tool {
	return newCognitive(cognitive{
		name: ThinkName,
		description: "Reason through a problem step by step before you answer, so the user can follow how you got there. " +
			"Write the reasoning yourself and pass it in `reasoning` as markdown, organised under these headings: " +
			"**Problem** (what is really being asked, and what a good answer needs), " +
			"**Facts and assumptions** (what is known, what you are assuming, and which assumptions matter most), " +
			"**Reasoning** (numbered steps, each following from the ones before), " +
			"**Uncertainties** (where the reasoning could be wrong and what would change it), " +
			"**Conclusion** (the answer the steps lead to, in one or two sentences).",
		heading:    "Thinking",
		titleField: "topic",
		bodyField:  "reasoning",
		aliases:    map[string]string{agentDockTopic: "topic"},
	}, map[string]string{
		"topic":     "A short name for the problem being reasoned about; it becomes the heading.",
		"reasoning": "The full step-by-step reasoning in markdown, with the sections named in the tool description.",
	})
}

// Reflect frames a retrospective on something that happened.
func Reflect() Tool {
	return newCognitive(cognitive{
		name: ReflectName,
		description: "Look back at an earlier answer, decision, attempt or experience and draw lessons from it. " +
			"Write the reflection yourself and pass it in `reflection` as markdown, organised under these headings: " +
			"**Context** (what was attempted and with what aim), " +
			"**What happened** (the outcome, stated plainly), " +
			"**What worked** and **What fell short** (with the reasons, not only the symptoms), " +
			"**Lessons** (the general principles this case teaches), " +
			"**Next time** (concrete changes to make). " +
			"Optionally rate your `confidence` in the reflection from 0 to 1.",
		heading:    "Reflection",
		titleField: "topic",
		bodyField:  "reflection",
		aliases:    map[string]string{agentDockTopic: "topic"},
		confidence: true,
	}, map[string]string{
		"topic":      "A short name for what is being reflected on; it becomes the heading.",
		"reflection": "The reflection in markdown, with the sections named in the tool description.",
	})
}

// Critique frames a structured evaluation of a piece of work.
func Critique() Tool {
	return newCognitive(cognitive{
		name: CritiqueName,
		description: "Evaluate a piece of work (code, writing, an argument, a plan or a design) fairly and usefully. " +
			"Write the critique yourself and pass it in `analysis` as markdown, organised under these headings: " +
			"**Understanding** (restate what the work is and what it is trying to achieve, so misreadings show early), " +
			"**Strengths** (numbered, each with why it helps), " +
			"**Issues** (numbered, most serious first, each with its consequence), " +
			"**Suggestions** (specific changes, each tied to an issue), " +
			"**Overall assessment** (a short verdict on whether the work meets its aim and what matters most to fix).",
		heading:    "Critique",
		titleField: "subject",
		bodyField:  "analysis",
	}, map[string]string{
		"subject":  "A short description of the work being critiqued; it becomes the heading.",
		"analysis": "The critique in markdown, with the sections named in the tool description.",
	})
}

// Debate frames a multi-sided examination of a contested question.
func Debate() Tool {
	return newCognitive(cognitive{
		name: DebateName,
		description: "Examine a contested or many-sided question by arguing each serious position at its strongest before judging. " +
			"Write the debate yourself and pass it in `perspectives` as markdown, organised under these headings: " +
			"**The question** (what is disputed and why reasonable people disagree), " +
			"one **Position** section per viewpoint (at least two), each giving its best arguments, the strongest objections to it, and the evidence on each side, " +
			"**Common ground** (what the positions share or could concede), " +
			"**Judgement** (which position holds up best, under which conditions, and how confident that judgement is).",
		heading:    "Debate",
		titleField: "topic",
		bodyField:  "perspectives",
	}, map[string]string{
		"topic":        "The question under debate, briefly; it becomes the heading.",
		"perspectives": "The debate in markdown, with the sections named in the tool description.",
	})
}

// Brainstorm frames a broad, grouped set of ideas for a challenge.
func Brainstorm() Tool {
	return newCognitive(cognitive{
		name: BrainstormName,
		description: "Generate a wide range of ideas for a problem or opportunity, going past the obvious ones. " +
			"Write the ideas yourself and pass them in `ideas` as markdown, organised under these headings: " +
			"**Reframing** (the challenge restated in one or more ways that open up new solutions), " +
			"several **idea groups**, each named for its approach, listing concrete ideas and where each would apply, " +
			"**Most promising** (the few ideas worth pursuing first, and why), " +
			"**Next steps** (how to test or develop them).",
		heading:    "Brainstorm",
		titleField: "challenge",
		bodyField:  "ideas",
	}, map[string]string{
		"challenge": "The problem or opportunity, briefly; it becomes the heading.",
		"ideas":     "The ideas in markdown, with the sections named in the tool description.",
	})
}

// Compare frames a side-by-side evaluation of options.
func Compare() Tool {
	return newCognitive(cognitive{
		name: CompareName,
		description: "Compare two or more options, approaches or concepts systematically so the choice between them is clear. " +
			"Write the comparison yourself and pass it in `comparison` as markdown, organised under these headings: " +
			"**Options** (what is being compared and for what purpose), " +
			"**Criteria** (the dimensions that matter, most important first), " +
			"**Side by side** (a markdown table of the options against the criteria, followed by notes on the differences that decide), " +
			"**Trade-offs** (which option wins in which situation), " +
			"**Recommendation** (the choice for the stated purpose, and when another option would be better).",
		heading:    "Comparison",
		titleField: "topic",
		bodyField:  "comparison",
		aliases:    map[string]string{agentDockTopic: "topic"},
	}, map[string]string{
		"topic":      "A short description of what is being compared; it becomes the heading.",
		"comparison": "The comparison in markdown, with the sections named in the tool description.",
	})
}

func newCognitive(c cognitive, fieldDocs map[string]string) *cognitive {
	props := map[string]any{
		c.titleField: map[string]any{
			"type": "string", "minLength": 1, "maxLength": maxTitleLen,
			"description": fieldDocs[c.titleField],
		},
		c.bodyField: map[string]any{
			"type": "string", "minLength": 1, "maxLength": maxBodyLen,
			"description": fieldDocs[c.bodyField],
		},
	}
	if c.confidence {
		props["confidence"] = map[string]any{
			"type": "number", "minimum": 0, "maximum": 1,
			"description": "How confident you are in the reflection, from 0 (not at all) to 1 (fully).",
		}
	}
	schema := map[string]any{
		"type":                 "object",
		"properties":           props,
		"required":             []string{c.titleField, c.bodyField},
		"additionalProperties": false,
	}
	raw, err := json.Marshal(schema)
	if err != nil {
		panic(fmt.Sprintf("tools: marshal %s schema: %v", c.name, err)) // static data; cannot fail
	}
	c.params = raw
	return &c
}

func (c *cognitive) Spec() chat.ToolSpec {
	return chat.ToolSpec{Name: c.name, Description: c.description, Parameters: c.params}
}

func (c *cognitive) Aliases() map[string]string { return maps.Clone(c.aliases) }

// Idempotent implements Idempotent: a cognitive tool only formats its
// arguments.
func (c *cognitive) Idempotent() bool { return true }

func (c *cognitive) Call(_ context.Context, args json.RawMessage) (Result, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(args, &fields); err != nil {
		return Result{}, fmt.Errorf("decode arguments: %w", err)
	}
	title, err := stringField(fields, c.titleField)
	if err != nil {
		return Result{}, err
	}
	title = strings.Join(strings.Fields(title), " ")
	body, err := stringField(fields, c.bodyField)
	if err != nil {
		return Result{}, err
	}
	var b strings.Builder
	b.Grow(len(title) + len(body) + 64)
	b.WriteString("## ")
	b.WriteString(c.heading)
	b.WriteString(": ")
	b.WriteString(title)
	b.WriteString("\n\n")
	b.WriteString(body)
	if raw, ok := fields["confidence"]; ok && c.confidence {
		var conf float64
		if err := json.Unmarshal(raw, &conf); err != nil {
			return Result{}, fmt.Errorf("field \"confidence\": %w", err)
		}
		b.WriteString("\n\n*Confidence: ")
		b.WriteString(strconv.FormatFloat(conf*100, 'f', -1, 64))
		b.WriteString("%*")
	}
	return Result{Content: b.String(), Type: c.name + "_result"}, nil
}

// stringField reads a required string argument. Text that is only whitespace
// passes a minLength check but frames nothing, so it is refused here. The
// title is folded onto one line because a line break would end the heading.
func stringField(fields map[string]json.RawMessage, name string) (string, error) {
	raw, ok := fields[name]
	if !ok {
		return "", fmt.Errorf("missing required field %q", name)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("field %q must be a string", name)
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return "", fmt.Errorf("field %q must not be blank", name)
	}
	return s, nil
}

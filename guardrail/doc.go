// Package guardrail checks the text of a turn against the guardrails an
// agent template declares (options.guardrails, and a step's guardrails
// while the step is active): the user's input, the model's output as it
// streams, a tool call's arguments and a tool's result.
//
// A Spec is a guardrail as declared; Compile checks a list of them,
// reporting every problem at its field, and compiles them. A Set holds the
// guardrails in force at one moment. Set.Check checks a whole text (an
// input, a tool's result), Set.CheckArguments a tool call's arguments,
// and Set.Stream returns a Stream that filters an output chunk by chunk.
//
// The checks are pure and fast: regular expressions (RE2), personal data
// (email, phone, credit_card with a Luhn check, iban with its check
// digits, ip_address, us_ssn), credentials (the keys and tokens of common
// providers, private keys, assignments of passwords and keys, and tokens
// that read as random), deny lists of words and phrases (ignoring case
// under Unicode simple folding, as the orchestration's message conditions
// do), and a length limit. A model check asks a Judge, which the caller
// provides (package llmorch asks a model, or the offline model).
//
// A Stream never lets a redacted or blocked span through, and holds back
// only what could still become a match: whatever the chunks, its output is
// that of the whole text at once (see Stream).
package guardrail

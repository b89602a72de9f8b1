// The AI SDK's framework-agnostic Chat (AbstractChat) with a plain state
// container, as @ai-sdk/react gives it a React one: the Chat the e2e tests
// drive.
import { AbstractChat } from 'ai';

export class PlainState {
  constructor() {
    this.messages = [];
    this.status = 'ready';
    this.error = undefined;
  }
  pushMessage(m) { this.messages = [...this.messages, m]; }
  popMessage() { this.messages = this.messages.slice(0, -1); }
  replaceMessage(i, m) { this.messages = [...this.messages.slice(0, i), m, ...this.messages.slice(i + 1)]; }
  snapshot(x) { return structuredClone(x); }
}

export class Chat extends AbstractChat {
  constructor(opts) { super({ ...opts, state: new PlainState() }); }
}

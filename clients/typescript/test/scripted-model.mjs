// A scripted language model for tests: each call answers with the next step of a script.
import { MockLanguageModelV4 } from 'ai/test';

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 5, text: 5, reasoning: 0 },
};

function content(step) {
  if (step.tool) {
    return [{ type: 'tool-call', toolCallId: step.id, toolName: step.tool, input: JSON.stringify(step.input ?? {}) }];
  }
  return [{ type: 'text', text: step.text }];
}

/** steps: [{text} | {tool, id, input}]; a step after the script's end repeats the last text. */
export function scriptedModel(steps) {
  let i = 0;
  const next = () => steps[Math.min(i++, steps.length - 1)];
  const finish = (step) => ({ unified: step.tool ? 'tool-calls' : 'stop', raw: undefined });
  return new MockLanguageModelV4({
    doGenerate: async () => {
      const step = next();
      return { content: content(step), finishReason: finish(step), usage, warnings: [] };
    },
    doStream: async () => {
      const step = next();
      const parts = [{ type: 'stream-start', warnings: [] }];
      if (step.tool) {
        parts.push({ type: 'tool-call', toolCallId: step.id, toolName: step.tool, input: JSON.stringify(step.input ?? {}) });
      } else {
        parts.push({ type: 'text-start', id: 't' }, { type: 'text-delta', id: 't', delta: step.text }, { type: 'text-end', id: 't' });
      }
      parts.push({ type: 'finish', finishReason: finish(step), usage });
      return {
        stream: new ReadableStream({ start(c) { for (const p of parts) c.enqueue(p); c.close(); } }),
      };
    },
  });
}

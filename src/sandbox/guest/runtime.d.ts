/**
 * Types for integration authors: the '@switchyard/runtime' library and its JSX runtime, as the
 * sandbox provides them at run time (the OAuth part is in runtime-oauth.d.ts; the declarations merge). Bundle scripts with esbuild, marking '@switchyard/runtime' and
 * '@switchyard/runtime/*' external, with `jsx: 'automatic'` and `jsxImportSource:
 * '@switchyard/runtime'`. Globals are the Workers-style Web APIs (lib "dom" types fit: fetch,
 * Request, Response, Headers, URL, crypto, TextEncoder, setTimeout, AbortController...).
 */
declare module '@switchyard/runtime' {
  // ---- ContentKit markup -------------------------------------------------------------------

  /** An action value carried by an interactive element, delivered to the component's `action`. */
  export interface ContentKitAction {
    action: string;
    [key: string]: unknown;
  }

  export type ContentKitChild = ContentKitElement | string;

  interface ElementBase<T extends string> {
    type: T;
    key?: string | number;
  }
  interface WithChildren<T extends string> extends ElementBase<T> {
    children?: ContentKitChild[];
  }

  export interface ContentKitBlock extends WithChildren<'block'> {
    title?: string;
    controls?: Array<{ label: string; onPress: ContentKitAction }>;
  }
  export interface ContentKitButton extends ElementBase<'button'> {
    label: string;
    onPress: ContentKitAction;
    style?: 'primary' | 'secondary' | 'danger';
    icon?: string;
    tooltip?: string;
    disabled?: boolean;
  }
  export interface ContentKitText extends WithChildren<'text'> {
    style?: 'bold' | 'italic' | 'strikethrough' | 'code';
  }
  export interface ContentKitMarkdown extends ElementBase<'markdown'> {
    content: string;
  }
  export interface ContentKitStack<T extends 'hstack' | 'vstack'> extends WithChildren<T> {
    align?: 'start' | 'center' | 'end';
  }
  export interface ContentKitBox extends WithChildren<'box'> {
    grow?: number;
  }
  export interface ContentKitDivider extends ElementBase<'divider'> {
    size?: 'small' | 'medium' | 'large';
  }
  export interface ContentKitCard extends WithChildren<'card'> {
    title?: string;
    hint?: string;
    icon?: ContentKitElement;
    onPress?: ContentKitAction;
  }
  export interface ContentKitImage extends ElementBase<'image'> {
    source: { url: string };
    aspectRatio?: number;
  }
  export interface ContentKitLink extends WithChildren<'link'> {
    target: { url: string };
  }
  export interface ContentKitInputBase<T extends string> extends ElementBase<T> {
    id: string;
    initialValue?: unknown;
    placeholder?: string;
  }
  export interface ContentKitInput extends WithChildren<'input'> {
    label: string;
    hint?: string;
    element: ContentKitElement;
  }
  export type ContentKitTextInput = ContentKitInputBase<'textinput'> & { multiline?: boolean };
  export type ContentKitSelect = ContentKitInputBase<'select'> & { options: Array<{ id: string; label: string }>; multiple?: boolean };
  export type ContentKitSwitch = ContentKitInputBase<'switch'>;
  export type ContentKitCheckbox = ContentKitInputBase<'checkbox'> & { value: string };
  export type ContentKitRadio = ContentKitInputBase<'radio'> & { value: string };
  export interface ContentKitWebframe extends ElementBase<'webframe'> {
    source: { url: string };
    aspectRatio?: number;
  }
  export interface ContentKitCodeblock extends ElementBase<'codeblock'> {
    content: string;
    syntax?: string;
    lineNumbers?: boolean;
  }
  export interface ContentKitModal extends WithChildren<'modal'> {
    title?: string;
    subtitle?: string;
  }
  export interface ContentKitHint extends WithChildren<'hint'> {
    style?: 'info' | 'warning' | 'danger' | 'success';
  }
  export type ContentKitStepper = WithChildren<'stepper'>;
  export interface ContentKitStep extends WithChildren<'step'> {
    title?: string;
  }

  /** Markup a component renders (the platform validates it; the runtime passes it through). */
  export type ContentKitElement =
    | ContentKitBlock
    | ContentKitButton
    | ContentKitText
    | ContentKitMarkdown
    | ContentKitStack<'hstack'>
    | ContentKitStack<'vstack'>
    | ContentKitBox
    | ContentKitDivider
    | ContentKitCard
    | ContentKitImage
    | ContentKitLink
    | ContentKitInput
    | ContentKitTextInput
    | ContentKitSelect
    | ContentKitSwitch
    | ContentKitCheckbox
    | ContentKitRadio
    | ContentKitWebframe
    | ContentKitCodeblock
    | ContentKitModal
    | ContentKitHint
    | ContentKitStepper
    | ContentKitStep;

  // ---- context (spec 2.4) ------------------------------------------------------------------

  export interface InstallationEnvironment {
    id: string;
    target?: string;
    status: 'active' | 'pending' | 'paused' | string;
    configuration: Record<string, unknown>;
    externalIds?: unknown;
    /**
     * Spec 2.4: whether all spaces or selected ones are used, and which (a gitbook-manifest.yaml
     * gets GitBook's string, `all` or `selected`).
     */
    space_selection?: { selection: 'all' | 'selected'; spaces: string[] } | 'all' | 'selected';
    urls: { publicEndpoint: string; [k: string]: string };
  }

  export interface Environment {
    /** URL of the platform API (the host performs context.api requests against it). */
    apiEndpoint: string;
    /**
     * Short-lived tokens for the API, opaque: the installation's (when the invocation has one) and
     * the integration's, which reads and updates every installation of this integration.
     */
    apiTokens: { installation?: string; integration?: string };
    integration: { name: string; urls: { publicEndpoint: string }; [k: string]: unknown };
    installation?: InstallationEnvironment;
    spaceInstallation?: InstallationEnvironment & { space: string };
    /** `space`: the space the site installation is in, when the install named one (spec 2.4). */
    siteInstallation?: InstallationEnvironment & { site: string; space?: string | null };
    /** Secrets declared under `secrets` in the manifest. */
    secrets: Record<string, string>;
    [k: string]: unknown;
  }

  /** Error thrown by context.api for 4xx/5xx answers, with the parsed body. */
  export class APIError extends Error {
    readonly status: number;
    readonly body: unknown;
  }

  export interface APIClient {
    /**
     * One request to the platform API. `path` is relative to environment.apiEndpoint
     * (`installations/inst_1`); a path starting with the endpoint's own path (`/api/v1/...`) is used
     * as is. Resolves with the parsed JSON (null when empty); throws APIError on 4xx/5xx.
     */
    request<T = any>(method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', path: string, body?: unknown): Promise<T>;
    installations: {
      get<T = any>(id: string): Promise<T>;
      /** PATCH installations/<id>, e.g. `{ configuration: { ... } }`. */
      update<T = any>(id: string, body: unknown): Promise<T>;
    };
    /** A client acting as one installation of this integration (from code holding the integration's token). */
    createInstallationClient(integration: string, installationId: string): Promise<APIClient>;
  }

  export interface Context<E extends Environment = Environment> {
    environment: E;
    /** Acts as the installation, else (the integration's own endpoint) as the integration. */
    api: APIClient;
    /** The integration as a whole: `integration.api` always acts with the integration's token. */
    integration: { api: APIClient; queueTask(input: unknown): Promise<never> };
    /** Keep work going after the response, up to sandbox.wait_until. */
    waitUntil(promise: Promise<unknown>): void;
    log: Pick<Console, 'log' | 'info' | 'warn' | 'error' | 'debug'>;
  }

  // ---- integration, components, events ------------------------------------------------------

  export interface ComponentElement<Props, State> {
    props: Props;
    state: State;
    /** Where the component is shown (from the ui_render event). */
    context: unknown;
  }

  export interface ComponentDefinition<Props = Record<string, unknown>, State = Record<string, unknown>, A extends ContentKitAction = ContentKitAction> {
    componentId: string;
    initialState?: (props: Props) => State;
    /** Return `{ state }` to replace the state, or `{}` to keep it. */
    action?: (
      element: ComponentElement<Props, State>,
      action: A,
      context: Context,
    ) => Promise<{ state?: State; props?: Props } | void> | { state?: State; props?: Props } | void;
    render: (element: ComponentElement<Props, State>, context: Context) => Promise<ContentKitElement | null> | ContentKitElement | null;
  }

  export type EventHandler<Ev = { type: string; [k: string]: unknown }> = (event: Ev, context: Context) => Promise<void> | void;

  export interface IntegrationDefinition {
    /** Requests to the installation's public endpoint (and OAuth callbacks, completion lists...). */
    fetch?: (request: Request, context: Context) => Promise<Response> | Response;
    components?: ComponentDefinition<any, any, any>[];
    /** Event type -> handler, or several handlers run together. */
    events?: Record<string, EventHandler<any> | EventHandler<any>[]>;
  }

  /** Declare the integration; make it the script's default export. */
  export function createIntegration(definition: IntegrationDefinition): IntegrationDefinition;
  export function createComponent<Props = Record<string, unknown>, State = Record<string, unknown>, A extends ContentKitAction = ContentKitAction>(
    component: ComponentDefinition<Props, State, A>,
  ): ComponentDefinition<Props, State, A>;

  /** Thrown to answer the caller with `{ "error": message }` and this status (default 400). */
  export class ExposableError extends Error {
    constructor(message: string, statusCode?: number);
    readonly statusCode: number;
    readonly status: number;
  }

  // createOAuthHandler, OAuthError, refreshCredentials: see runtime-oauth.d.ts (merged into this module).
}

declare module '@switchyard/runtime/jsx-runtime' {
  import type { ContentKitElement } from '@switchyard/runtime';
  export const Fragment: unique symbol;
  export function jsx(type: string | ((props: any) => unknown) | typeof Fragment, props: Record<string, unknown> | null, key?: string | number): any;
  export const jsxs: typeof jsx;
  type PropsOf<K extends ContentKitElement['type']> = Omit<Extract<ContentKitElement, { type: K }>, 'type' | 'children'> & { children?: unknown };
  export namespace JSX {
    type Element = ContentKitElement;
    interface ElementChildrenAttribute {
      // biome-ignore lint/complexity/noBannedTypes: TypeScript's JSX convention names the children prop with an empty type
      children: {};
    }
    /** Every ContentKit element, with its props typed. */
    type IntrinsicElements = { [K in ContentKitElement['type']]: PropsOf<K> };
  }
}

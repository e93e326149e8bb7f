/**
 * The signing secrets as `services.webhooks` offers them (secrets.ts keeps them), and the form a
 * secret must have for an installation that signs with standard-webhooks: one its receivers'
 * libraries can read (`whsec_` and base64 of a 24- to 64-byte key). Both checks fail closed:
 * nothing is stored.
 */
import { SwitchyardError } from '../errors.ts';
import type { Tx } from '../store/contract.ts';
import type { WebhooksService } from './contracts.ts';
import type { SignatureScheme } from './schemes.ts';
import type { WebhookSecrets } from './secrets.ts';
import { standardSecretProblem } from './standard-webhooks.ts';

export type SecretsService = Pick<WebhooksService, 'createSecret' | 'rotateSecret' | 'liveSecrets' | 'describe'>;

/** A secret given (`where`: the field it came in) for an installation that signs in `scheme`: refused when that scheme cannot use it. */
export function checkGivenFor(scheme: SignatureScheme | undefined, given: string | undefined, where: string): void {
  if (scheme !== 'standard-webhooks' || given === undefined) return;
  const problem = standardSecretProblem(given);
  if (problem)
    throw new SwitchyardError('bad_request', `this installation signs with standard-webhooks: ${problem}`, {
      where,
      hint: 'leave the secret out to have one generated in that form (whsec_ and 24 random bytes in base64)',
    });
}

/**
 * An installation switched to standard-webhooks: refused, in the edit's transaction (`tx`), when
 * its current secret is not in that form (a receiver could not verify with a secret it cannot read).
 */
export async function checkSwitchToStandard(secrets: Pick<WebhookSecrets, 'describe'>, tx: Tx, id: string): Promise<void> {
  const current = (await secrets.describe(id, tx))?.secret;
  const problem = current === undefined ? undefined : standardSecretProblem(current);
  if (problem)
    throw new SwitchyardError(
      'validation_failed',
      `installation ${id} cannot sign with standard-webhooks: its signing secret is not in that form; nothing was stored`,
      {
        where: 'configuration.signature_scheme',
        problems: [{ where: 'configuration.signature_scheme', message: problem }],
        hint: `rotate the secret first (\`switchyard installations secret ${id} --rotate\` makes one in that form), then set signature_scheme again`,
      },
    );
}

/** `schemeOf`: how the installation signs now (a rotation's given secret is checked against it). */
export function secretsService(secrets: WebhookSecrets, schemeOf: (installationId: string) => SignatureScheme): SecretsService {
  return {
    async createSecret(tx, id, given) {
      return secrets.createSecret(tx, id, given);
    },
    async rotateSecret(id, given) {
      checkGivenFor(schemeOf(id), given, 'secret');
      return secrets.rotateSecret(id, given);
    },
    liveSecrets: (id) => secrets.liveSecrets(id),
    describe: (id) => secrets.describe(id),
  };
}

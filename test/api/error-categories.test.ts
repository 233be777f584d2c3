import { expect } from 'chai';
import { errorBody } from '../../api/errors.ts';

describe('errorBody: each status has its diagnostic category and title', () => {
  const table = [
    { reason: 'a rate limit (webhooks, task claims) is rate_limit, not internal', status: 429, want: { category: 'rate_limit', title: 'Too many requests' } },
    { reason: 'a workspace root that is gone is gone, not internal', status: 410, want: { category: 'gone', title: 'Gone' } },
    { reason: 'a refused credential is auth', status: 401, want: { category: 'auth', title: 'Unauthorized' } },
    { reason: 'only a 500 is internal', status: 500, want: { category: 'internal', title: 'Internal error' } },
  ];
  for (const { reason, status, want } of table) {
    it(reason, () => expect(errorBody(status, 'c', 'm').diagnostic).to.include(want));
  }
});

/** Entry of the console's browser bundle. */
import { render } from 'preact';
import { App } from './app.tsx';
import './style.css';

const root = document.getElementById('app');
if (root) {
  root.textContent = '';
  render(<App />, root);
}
